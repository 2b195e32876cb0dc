// Training-step throughput of the CPU engine on a GPT-2-shaped model (GPT-2 124M by
// default: L=12, C=768, NH=12, V=50257, tied head, B=4, T=64) under the baseline and
// every FP8 recipe, against the fastest sgemm of this machine measured in the same run.
// Goals: the baseline's forward + backward reaches at least half the fastest sgemm rate
// for its FLOPs; each FP8 recipe (quantize-dequantize around the same sgemm) adds at most
// 30% to it.
//
// "The fastest sgemm": the engine's fprop shape (N, 4C, C) under every OpenBLAS kernel
// this CPU can run (kernels/cpu/blas.h), the best of them; the engine's own choice is
// printed beside it, so a machine whose OpenBLAS picked a slow kernel shows it.
//
// Per recipe: forward + backward (fwd+bwd), its quantize time (from the op timings of one
// extra, timed step), AdamW with gradient clipping as the trainer runs it (opt), and the
// whole step. The recipes take turns, one step each per round, so that all see the same
// machine. Wall times are the best and the median of --steps rounds; CPU times (all
// threads of the process: fwd+bwd and the whole step) are given too: on a machine shared
// with other work they follow the work done, not the load. "of sgemm" and "vs base" use
// wall time; "sgemm cpu" and "base cpu" are the same ratios in CPU time. The loss is that
// of the initial weights under the recipe.
//
// FLOPs counted per step: 6*N*K*M for every linear (fprop, dgrad, wgrad) and the output
// head, and the causal attention core as computed (q.k and a.v over T(T+1)/2 pairs,
// backward twice the forward). N = B*T tokens.
//
// usage: bench_train_step [--layers 12] [--width 768] [--heads 12] [--vocab 50257] [--tie 1]
//                         [--seq 64] [--batch 4] [--threads 0] [--steps 5] [--warmup 1]
//                         [--recipes a,b,...] [--profile 1]   (per-op times of the profiled step)
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "cpu/blas.h"
#include "cpu/cpu_backend.h"
#include "cpu/cpu_info.h"
#include "cpu/ops/matmul.h"
#include "engine/model.h"
#include "engine/optimizer.h"
#include "util/parallel.h"

using namespace fp8scope;

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

double cpu_seconds() {  // CPU time of the whole process, every thread
    timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

struct Rate {
    double wall = 0, cpu = 0;  // GFLOP per wall second, per CPU second
};

// Best-of-7 rate of C (M,N) = A (M,K) B (N,K)^T under the current kernel.
Rate sgemm_rate(int M, int N, int K) {
    std::vector<float> a(std::size_t(M) * K, 0.5f), b(std::size_t(N) * K, 0.25f), c(std::size_t(M) * N);
    double best_wall = 1e30, best_cpu = 1e30;
    for (int rep = 0; rep < 7; ++rep) {
        const auto t0 = Clock::now();
        const double c0 = cpu_seconds();
        ops::sgemm(false, true, M, N, K, a.data(), b.data(), c.data());
        best_cpu = std::min(best_cpu, cpu_seconds() - c0);
        best_wall = std::min(best_wall, seconds_since(t0));
    }
    const double gflop = 2.0 * M * N * K * 1e-9;
    return {gflop / best_wall, gflop / best_cpu};
}

double step_flops(const ModelConfig& c, int B, int T) {
    const double N = double(B) * T, C = c.d_model, H = c.hidden(), V = c.vocab_size;
    const double H1 = c.mlp == MlpKind::SwiGLU ? 2 * H : H;
    double linear = 6.0 * N * (C * 3 * C + C * C + C * H1 + H * C) * c.n_layer;
    double head = 6.0 * N * C * V;
    double hs = C / c.n_head;
    double attention = 3.0 * 4.0 * B * c.n_head * hs * (double(T) * (T + 1) / 2) * c.n_layer;
    return linear + head + attention;
}

// Sums the op timings the model reports, per op name.
class OpProfile : public CaptureSink {
public:
    std::map<std::string, double> ms;
    void on_operand(const OperandCapture&) override {}
    void on_op(const OpTiming& t) override { ms[std::string(t.op)] += double(t.end_ns - t.start_ns) * 1e-6; }
};

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
    ModelConfig c{.vocab_size = 50257, .max_seq = 1024, .n_layer = 12, .d_model = 768, .n_head = 12,
                  .tie_embeddings = true};  // GPT-2 124M
    int B = 4, T = 64, steps = 5, warmup = 1, profile = 0, threads = 0;
    std::string recipes = "baseline,delayed,delayed_e4m3,current,blockwise,mxfp8";
    for (int i = 1; i + 1 < argc; i += 2) {
        std::string k = argv[i];
        const char* v = argv[i + 1];
        if (k == "--layers") c.n_layer = std::atoi(v);
        else if (k == "--width") c.d_model = std::atoi(v);
        else if (k == "--heads") c.n_head = std::atoi(v);
        else if (k == "--vocab") c.vocab_size = std::atoi(v);
        else if (k == "--tie") c.tie_embeddings = std::atoi(v) != 0;
        else if (k == "--seq") T = std::atoi(v);
        else if (k == "--batch") B = std::atoi(v);
        else if (k == "--threads") threads = std::atoi(v);
        else if (k == "--steps") steps = std::max(1, std::atoi(v));
        else if (k == "--warmup") warmup = std::atoi(v);
        else if (k == "--recipes") recipes = v;
        else if (k == "--profile") profile = std::atoi(v);
        else {
            std::fprintf(stderr, "unknown option %s\n", k.c_str());
            return 2;
        }
    }
    c.max_seq = std::max(c.max_seq, T);
    const int N = B * T;

    CpuBackend cpu(threads);  // chooses the GEMM kernel and sets every thread count
    std::printf("%s\n", cpu.describe().c_str());
    std::printf("cpu model: %s | features: %s | %d threads of %u\n", cpu_model().c_str(), cpu_features().c_str(),
                default_threads(), std::thread::hardware_concurrency());

    // The machine's fastest sgemm on the fprop shape, over every kernel it can run.
    const std::string chosen = blas::current_kernel();
    std::string fastest = chosen;
    Rate peak{};
    std::string others;
    for (const std::string& k : blas::runnable_kernels()) {
        if (!blas::use_kernel(k)) continue;
        const Rate r = sgemm_rate(N, 4 * c.d_model, c.d_model);
        char buf[96];
        std::snprintf(buf, sizeof buf, "%s%s %.1f", others.empty() ? "" : ", ", k.c_str(), r.wall);
        others += buf;
        if (r.wall > peak.wall) peak = r, fastest = k;
    }
    blas::use_kernel(chosen);
    std::printf("sgemm %dx%dx%d (fprop shape), GFLOP/s wall by kernel: %s\n", N, 4 * c.d_model, c.d_model,
                others.c_str());
    std::printf("fastest sgemm of this machine: %s, %.1f GFLOP/s wall, %.1f per CPU-s; the engine runs %s\n",
                fastest.c_str(), peak.wall, peak.cpu, chosen.c_str());

    const double gflop = step_flops(c, B, T) * 1e-9;
    Model model(c, cpu);
    model.init(1);
    std::printf("model L=%d C=%d NH=%d V=%d%s, B=%d T=%d: %.1f M parameters, %.1f GFLOP per fwd+bwd, "
                "%d step(s) after %d warmup\n",
                c.n_layer, c.d_model, c.n_head, c.vocab_size, c.tie_embeddings ? " tied" : "", B, T,
                double(model.num_params()) * 1e-6, gflop, steps, warmup);
    std::vector<std::int32_t> tok(static_cast<std::size_t>(N)), tgt(static_cast<std::size_t>(N));
    for (int i = 0; i < N; ++i) {
        tok[std::size_t(i)] = (i * 7919) % c.vocab_size;
        tgt[std::size_t(i)] = (i * 104729 + 1) % c.vocab_size;
    }
    std::vector<std::string> names;
    for (std::size_t pos = 0; pos <= recipes.size();) {
        const std::size_t end = std::min(recipes.find(',', pos), recipes.size());
        if (end > pos) names.push_back(recipes.substr(pos, end - pos));
        pos = end + 1;
    }

    // Rounds of one step per recipe, so that every recipe sees the same machine over time
    // (on a shared machine the load drifts). AdamW runs at learning rate 0: its full cost,
    // and every recipe steps the same weights.
    const OptimizerConfig oc;
    AdamW adam(oc, model.param_tensors(), model.num_params(), cpu);
    struct Times {
        std::vector<double> wall, cpu, opt, step_cpu;
        float loss = 0;
    };
    std::map<std::string, Times> times;
    for (int round = 0; round < warmup + steps; ++round) {
        for (const std::string& name : names) {
            model.set_recipe(training_recipe(name));
            Times& t = times[name];
            const auto t0 = Clock::now();
            const double c0 = cpu_seconds();
            t.loss = model.forward(tok.data(), tgt.data(), B, T);
            model.backward();
            const double fb = seconds_since(t0) * 1e3, fb_cpu = (cpu_seconds() - c0) * 1e3;
            const auto t1 = Clock::now();
            const std::int64_t n = std::int64_t(model.num_params());
            const double norm = cpu.grad_norm(model.grads().data(), n);
            adam.step(model.params(), model.grads(), 0.0f, clip_factor(norm, oc.grad_clip));
            if (round < warmup) continue;
            t.wall.push_back(fb);
            t.cpu.push_back(fb_cpu);
            t.opt.push_back(seconds_since(t1) * 1e3);
            t.step_cpu.push_back((cpu_seconds() - c0) * 1e3);
        }
    }

    std::printf("\n%-13s %8s %8s %8s %8s %8s %8s %8s %8s %8s %8s %8s %8s %8s\n", "recipe", "fwd+bwd", "median",
                "cpu ms", "quant ms", "opt ms", "step ms", "step cpu", "GFLOP/s", "of sgemm", "sgemm cpu", "vs base",
                "base cpu", "loss");
    auto best = [](const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); };
    auto pct = [](double x, double base) {
        return base > 0 ? std::to_string(int(std::lround(100.0 * (x / base - 1)))) + "%" : std::string("-");
    };
    const double base_wall = times.count("baseline") ? best(times["baseline"].wall) : 0;
    const double base_cpu = times.count("baseline") ? best(times["baseline"].cpu) : 0;
    for (const std::string& name : names) {
        const Times& t = times[name];
        OpProfile prof;  // one more step with op timings: the quantize time
        model.set_recipe(training_recipe(name));
        model.set_capture(&prof, false);
        model.forward(tok.data(), tgt.data(), B, T);
        model.backward();
        model.set_capture(nullptr, false);
        const double rate = gflop / (best(t.wall) * 1e-3), rate_cpu = gflop / (best(t.cpu) * 1e-3);
        std::printf("%-13s %8.1f %8.1f %8.1f %8.1f %8.1f %8.1f %8.1f %8.1f %7.0f%% %8.0f%% %8s %8s %8.4f\n",
                    name.c_str(), best(t.wall), median(t.wall), best(t.cpu), prof.ms["quantize"], best(t.opt),
                    best(t.wall) + best(t.opt), best(t.step_cpu), rate, 100.0 * rate / peak.wall,
                    100.0 * rate_cpu / peak.cpu, pct(best(t.wall), base_wall).c_str(),
                    pct(best(t.cpu), base_cpu).c_str(), t.loss);
        if (profile)
            for (const auto& [op, ms] : prof.ms) std::printf("    %-14s %8.1f ms\n", op.c_str(), ms);
    }
    std::printf("\ngoals: baseline >= 50%% of the fastest sgemm; every FP8 recipe <= +30%% vs base\n");
    return 0;
}
