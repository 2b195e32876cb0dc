// Training-step throughput of the CPU engine: forward + backward of a GPT-2-small-shaped
// model under the baseline and every FP8 recipe, against the machine's plain sgemm rate
// measured in the same run. Goals: the baseline step reaches at least half the sgemm
// rate; FP8 emulation (quantize-dequantize around the same sgemm) adds at most 30%.
//
// On a shared machine wall time follows the load; process CPU time (all threads) does
// not, so every figure is given both ways: wall (best step) and CPU (best step), and the
// sgemm reference likewise. "of sgemm" and "vs base" use CPU time.
//
// FLOPs counted per step: 6*N*K*M for every linear (fprop, dgrad, wgrad) and the output
// head, and the causal attention core as computed (q.k and a.v over T(T+1)/2 pairs,
// backward twice the forward). N = B*T tokens.
//
// usage: bench_train_step [--layers 12] [--width 768] [--heads 12] [--vocab 50257]
//                         [--seq 64] [--batch 4] [--steps 1] [--warmup 1] [--recipes a,b,...]
//                         [--profile 1]   (per-op time of the last step, from the capture sink)
#include <cblas.h>
#include <time.h>

#include <algorithm>
#include <cmath>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "cpu/cpu_backend.h"
#include "engine/model.h"

using namespace fp8scope;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double cpu_seconds() {  // CPU time of the whole process, every thread
    timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

struct Rate {
    double wall = 0, cpu = 0;  // GFLOP per wall second, per CPU second
};

// Best-of-5 rate of C (M,N) = A (M,K) B (N,K)^T, the fprop shape of the engine. It is
// measured again right before each recipe, so that on a shared machine the step and
// its reference see similar load.
Rate sgemm_gflops(int M, int N, int K) {
    std::vector<float> a(std::size_t(M) * K, 0.5f), b(std::size_t(N) * K, 0.25f), c(std::size_t(M) * N);
    double best_wall = 1e30, best_cpu = 1e30;
    for (int rep = 0; rep < 5; ++rep) {
        auto t0 = std::chrono::steady_clock::now();
        double c0 = cpu_seconds();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, a.data(), K, b.data(), K, 0.0f,
                    c.data(), N);
        best_cpu = std::min(best_cpu, cpu_seconds() - c0);
        best_wall = std::min(best_wall, seconds_since(t0));
    }
    double flops = 2.0 * M * N * K * 1e-9;
    return {flops / best_wall, flops / best_cpu};
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
    void on_op(const OpTiming& t) override { ms[std::string(t.op)] += (t.end_ns - t.start_ns) * 1e-6; }
};

}  // namespace

int main(int argc, char** argv) {
    ModelConfig c;
    c.n_layer = 12;
    c.d_model = 768;
    c.n_head = 12;
    c.vocab_size = 50257;
    int B = 4, T = 64, steps = 1, warmup = 1, profile = 0;
    std::string recipes = "baseline,delayed,delayed_e4m3,current,blockwise,mxfp8";
    for (int i = 1; i + 1 < argc; i += 2) {
        std::string k = argv[i];
        const char* v = argv[i + 1];
        if (k == "--layers") c.n_layer = std::atoi(v);
        else if (k == "--width") c.d_model = std::atoi(v);
        else if (k == "--heads") c.n_head = std::atoi(v);
        else if (k == "--vocab") c.vocab_size = std::atoi(v);
        else if (k == "--seq") T = std::atoi(v);
        else if (k == "--batch") B = std::atoi(v);
        else if (k == "--steps") steps = std::atoi(v);
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

    Rate peak = sgemm_gflops(N, 4 * c.d_model, c.d_model);
    std::printf("sgemm %dx%dx%d (fprop shape): %.1f GFLOP/s wall, %.1f GFLOP per CPU-s, OpenBLAS threads %d\n", N,
                4 * c.d_model, c.d_model, peak.wall, peak.cpu, openblas_get_num_threads());
    std::printf("model L=%d C=%d NH=%d V=%d, B=%d T=%d, %.1f GFLOP per step, %d step(s) after %d warmup\n",
                c.n_layer, c.d_model, c.n_head, c.vocab_size, B, T, step_flops(c, B, T) * 1e-9, steps, warmup);

    auto t_alloc = std::chrono::steady_clock::now();
    CpuBackend cpu;
    std::printf("%s\n", cpu.describe().c_str());
    Model model(c, cpu);
    double alloc_s = seconds_since(t_alloc);
    auto t_init = std::chrono::steady_clock::now();
    model.init(1);
    std::printf("allocate %.1f s, init %.1f s, %.1f M parameters\n", alloc_s, seconds_since(t_init),
                model.num_params() * 1e-6);

    std::vector<std::int32_t> tok(static_cast<std::size_t>(N)), tgt(static_cast<std::size_t>(N));
    for (int i = 0; i < N; ++i) {
        tok[std::size_t(i)] = (i * 7919) % c.vocab_size;
        tgt[std::size_t(i)] = (i * 104729 + 1) % c.vocab_size;
    }
    std::printf("%-13s %8s %8s %9s %9s %8s %8s %9s %8s %8s\n", "recipe", "wall ms", "cpu ms", "tokens/s",
                "GFLOP/s", "per cpu", "sgemm", "of sgemm", "vs base", "loss");
    double base_cpu = 0;
    std::size_t pos = 0;
    while (pos <= recipes.size()) {
        std::size_t end = std::min(recipes.find(',', pos), recipes.size());
        std::string name = recipes.substr(pos, end - pos);
        pos = end + 1;
        if (name.empty()) continue;
        model.set_recipe(training_recipe(name));
        peak = sgemm_gflops(N, 4 * c.d_model, c.d_model);
        float loss = 0;
        for (int s = 0; s < warmup; ++s) {
            loss = model.forward(tok.data(), tgt.data(), B, T);
            model.backward();
        }
        double ms = 1e30, cpu_ms = 1e30;  // best step: the least disturbed by other work
        for (int s = 0; s < steps; ++s) {
            auto t0 = std::chrono::steady_clock::now();
            double c0 = cpu_seconds();
            loss = model.forward(tok.data(), tgt.data(), B, T);
            model.backward();
            cpu_ms = std::min(cpu_ms, (cpu_seconds() - c0) * 1e3);
            ms = std::min(ms, seconds_since(t0) * 1e3);
        }
        if (name == "baseline") base_cpu = cpu_ms;
        const double gflop = step_flops(c, B, T) * 1e-9;
        std::printf("%-13s %8.0f %8.0f %9.0f %9.1f %8.1f %8.1f %8.0f%% %8s %8.4f\n", name.c_str(), ms, cpu_ms,
                    N / (ms * 1e-3), gflop / (ms * 1e-3), gflop / (cpu_ms * 1e-3), peak.cpu,
                    100.0 * gflop / (cpu_ms * 1e-3) / peak.cpu,
                    base_cpu > 0 ? (std::to_string(int(std::lround(100.0 * (cpu_ms / base_cpu - 1)))) + "%").c_str()
                                 : "-",
                    loss);
        if (profile) {
            OpProfile prof;
            model.set_capture(&prof, false);
            model.forward(tok.data(), tgt.data(), B, T);
            model.backward();
            model.set_capture(nullptr, false);
            for (const auto& [op, t] : prof.ms) std::printf("    %-14s %8.1f ms\n", op.c_str(), t);
        }
    }
    return 0;
}
