// The float32 GEMM rate of this machine under every OpenBLAS kernel it can run, on the
// GEMM shapes of one training step (a linear layer's fprop, dgrad and wgrad, and the
// output head), on one thread and on all: which kernel is fastest, and whether the one
// the engine chose (kernels/cpu/blas.h) is it. All kernels run in this one process (the
// engine's kernel switch), so they see the same machine state.
//
// Rates are GFLOP per wall second of the best of `reps` runs, and GFLOP per CPU second
// of the process (all threads; on a shared machine it is the steadier figure).
//
// usage: bench_sgemm [--threads N (0: all)] [--reps 5] [--width 768] [--tokens 256]
//                    [--vocab 50257] [--kernels all|chosen]
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "cpu/blas.h"
#include "cpu/cpu_backend.h"
#include "cpu/cpu_info.h"
#include "cpu/ops/matmul.h"

using namespace fp8scope;

namespace {

double cpu_seconds() {
    timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

// C (m,n) = op(A) op(B) as the engine calls it (ops::sgemm, row-major).
struct Shape {
    std::string name;
    bool ta, tb;
    std::int64_t m, n, k;
    double flops() const { return 2.0 * double(m) * double(n) * double(k); }
};

struct Rate {
    double wall = 0, cpu = 0;  // GFLOP/s
};

// Best of `reps` (at most ~0.5 s of repeats after the first two).
Rate measure(const Shape& s, int reps) {
    std::vector<float> a(std::size_t(s.m * s.k), 0.5f), b(std::size_t(s.n * s.k), 0.25f), c(std::size_t(s.m * s.n));
    double best_wall = 1e30, best_cpu = 1e30, spent = 0;
    for (int r = 0; r < reps && (r < 2 || spent < 0.5); ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        const double c0 = cpu_seconds();
        ops::sgemm(s.ta, s.tb, s.m, s.n, s.k, a.data(), b.data(), c.data());
        const double w = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        best_cpu = std::min(best_cpu, cpu_seconds() - c0);
        best_wall = std::min(best_wall, w);
        spent += w;
    }
    return {s.flops() * 1e-9 / best_wall, s.flops() * 1e-9 / best_cpu};
}

}  // namespace

int main(int argc, char** argv) {
    int threads = 0, reps = 5;
    std::int64_t C = 768, N = 256, V = 50257;
    std::string which = "all";
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string k = argv[i];
        const char* v = argv[i + 1];
        if (k == "--threads") threads = std::atoi(v);
        else if (k == "--reps") reps = std::max(1, std::atoi(v));
        else if (k == "--width") C = std::atoll(v);
        else if (k == "--tokens") N = std::atoll(v);
        else if (k == "--vocab") V = std::atoll(v);
        else if (k == "--kernels") which = v;
        else {
            std::fprintf(stderr, "unknown option %s\n", k.c_str());
            return 2;
        }
    }
    const int all = threads > 0 ? threads : int(std::max(1u, std::thread::hardware_concurrency()));
    CpuBackend cpu(all);  // chooses the kernel, sets the thread counts
    const std::string chosen = blas::current_kernel();
    std::printf("%s\n", cpu_description().c_str());
    std::printf("cpu model: %s | features: %s | hardware threads %u\n", cpu_model().c_str(), cpu_features().c_str(),
                std::thread::hardware_concurrency());

    // The GEMMs of one GPT-2-small-shaped step with N = B*T tokens (fprop, dgrad, wgrad
    // per linear as Fp8Linear issues them; the head's forward and its two gradients).
    const std::int64_t H = 4 * C;
    std::vector<Shape> shapes;
    for (auto [name, K, M] : {std::tuple{"qkv", C, 3 * C}, {"proj", C, C}, {"fc1", C, H}, {"fc2", H, C}}) {
        shapes.push_back({std::string(name) + " fprop", false, true, N, M, K});
        shapes.push_back({std::string(name) + " dgrad", false, false, N, K, M});
        shapes.push_back({std::string(name) + " wgrad", true, false, M, K, N});
    }
    shapes.push_back({"head fprop", false, true, N, V, C});
    shapes.push_back({"head dgrad", false, false, N, C, V});
    shapes.push_back({"head wgrad", true, false, V, C, N});

    std::vector<std::string> kernels = {chosen};
    if (which == "all")
        for (const std::string& k : blas::runnable_kernels())
            if (k != chosen) kernels.push_back(k);

    struct Summary {
        std::string kernel;
        double step1 = 0, stepN = 0, fprop1 = 0, fpropN = 0;  // wall
        double cpu1 = 0, cpuN = 0;                            // step mix per CPU second
    };
    std::vector<Summary> summary;
    for (const std::string& kernel : kernels) {
        if (!blas::use_kernel(kernel)) {
            std::printf("\nkernel %s: this OpenBLAS cannot switch to it\n", kernel.c_str());
            continue;
        }
        Summary sum{kernel};
        std::printf("\nkernel %s%s\n%-12s %6s %6s %6s | %9s %9s | %9s %9s\n", kernel.c_str(),
                    kernel == chosen ? " (the engine's choice)" : "", "gemm", "m", "n", "k", "1 thr wall", "per cpu",
                    (std::to_string(all) + " thr wall").c_str(), "per cpu");
        double flops = 0, t1 = 0, tN = 0, c1 = 0, cN = 0;
        for (const Shape& s : shapes) {
            ops::set_blas_threads(1);
            const Rate one = measure(s, reps);
            ops::set_blas_threads(all);
            const Rate many = measure(s, reps);
            std::printf("%-12s %6lld %6lld %6lld | %9.1f %9.1f | %9.1f %9.1f\n", s.name.c_str(), (long long)s.m,
                        (long long)s.n, (long long)s.k, one.wall, one.cpu, many.wall, many.cpu);
            flops += s.flops() * 1e-9;
            t1 += s.flops() * 1e-9 / one.wall;
            tN += s.flops() * 1e-9 / many.wall;
            c1 += s.flops() * 1e-9 / one.cpu;
            cN += s.flops() * 1e-9 / many.cpu;
            if (s.name == "fc1 fprop") sum.fprop1 = one.wall, sum.fpropN = many.wall;
        }
        sum.step1 = flops / t1;
        sum.stepN = flops / tN;
        sum.cpu1 = flops / c1;
        sum.cpuN = flops / cN;
        std::printf("%-12s %20s | %9.1f %9.1f | %9.1f %9.1f   (the step's GEMMs together, %.1f GFLOP)\n", "step mix",
                    "", sum.step1, sum.cpu1, sum.stepN, sum.cpuN, flops);
        summary.push_back(sum);
    }
    blas::use_kernel(chosen);

    // Wall rates rank kernels on a quiet machine; on one shared with other work, the rates
    // per CPU second do (wall time then follows the load).
    const std::string n = std::to_string(all);
    std::printf("\n%-12s %11s %11s %11s %11s %11s %11s\n", "kernel", "fc1 1 thr", ("fc1 " + n + " thr").c_str(),
                "step 1 thr", ("step " + n + " thr").c_str(), "1 thr/cpu-s", (n + " thr/cpu-s").c_str());
    const Summary *best_wall = nullptr, *best_cpu = nullptr;
    for (const Summary& s : summary) {
        std::printf("%-12s %11.1f %11.1f %11.1f %11.1f %11.1f %11.1f\n", s.kernel.c_str(), s.fprop1, s.fpropN, s.step1,
                    s.stepN, s.cpu1, s.cpuN);
        if (!best_wall || s.stepN > best_wall->stepN) best_wall = &s;
        if (!best_cpu || s.cpu1 > best_cpu->cpu1) best_cpu = &s;
    }
    auto verdict = [&](const Summary* best, double Summary::*rate) {
        const Summary& mine = summary.front();  // the engine's kernel is measured first
        return best->kernel == chosen ? "it" : mine.*rate >= 0.97 * best->*rate ? "within 3% of it" : "NOT it";
    };
    if (best_wall && best_cpu) {
        std::printf("fastest by wall time at %d threads: %s; by CPU time on one thread: %s\n", all,
                    best_wall->kernel.c_str(), best_cpu->kernel.c_str());
        std::printf("the engine runs %s: %s by wall time, %s by CPU time\n", chosen.c_str(),
                    verdict(best_wall, &Summary::stepN), verdict(best_cpu, &Summary::cpu1));
    }
    return 0;
}
