// Training-step throughput of the CPU engine: forward + backward of a GPT-2-small-shaped
// model under the baseline and every FP8 recipe, against the machine's plain sgemm rate
// measured in the same run. Goals: the baseline step reaches at least half the sgemm
// rate; FP8 emulation (quantize-dequantize around the same sgemm) adds at most 30%.
//
// FLOPs counted per step: 6*N*K*M for every linear (fprop, dgrad, wgrad) and the output
// head, and the causal attention core as computed (q.k and a.v over T(T+1)/2 pairs,
// backward twice the forward). N = B*T tokens.
//
// usage: bench_train_step [--layers 12] [--width 768] [--heads 12] [--vocab 50257]
//                         [--seq 64] [--batch 4] [--steps 1] [--warmup 1] [--recipes a,b,...]
//                         [--profile 1]   (per-op time of the last step, from the capture sink)
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "engine/model.h"

using namespace fp8scope;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Best-of-5 rate of C (M,N) = A (M,K) B (N,K)^T, the fprop shape of the engine.
double sgemm_gflops(int M, int N, int K) {
    std::vector<float> a(std::size_t(M) * K, 0.5f), b(std::size_t(N) * K, 0.25f), c(std::size_t(M) * N);
    double best = 1e30;
    for (int rep = 0; rep < 5; ++rep) {
        auto t0 = std::chrono::steady_clock::now();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, a.data(), K, b.data(), K, 0.0f,
                    c.data(), N);
        best = std::min(best, seconds_since(t0));
    }
    return 2.0 * M * N * K / best * 1e-9;
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

    double peak = sgemm_gflops(N, 4 * c.d_model, c.d_model);
    std::printf("sgemm %dx%dx%d (fprop shape): %.1f GFLOP/s, OpenBLAS threads %d\n", N, 4 * c.d_model, c.d_model,
                peak, openblas_get_num_threads());
    std::printf("model L=%d C=%d NH=%d V=%d, B=%d T=%d, %.1f GFLOP per step, %d step(s) after %d warmup\n",
                c.n_layer, c.d_model, c.n_head, c.vocab_size, B, T, step_flops(c, B, T) * 1e-9, steps, warmup);

    auto t_alloc = std::chrono::steady_clock::now();
    Model model(c);
    double alloc_s = seconds_since(t_alloc);
    auto t_init = std::chrono::steady_clock::now();
    model.init(1);
    std::printf("allocate %.1f s, init %.1f s, %.1f M parameters\n", alloc_s, seconds_since(t_init),
                model.params().size() * 1e-6);

    std::vector<std::int32_t> tok(static_cast<std::size_t>(N)), tgt(static_cast<std::size_t>(N));
    for (int i = 0; i < N; ++i) {
        tok[std::size_t(i)] = (i * 7919) % c.vocab_size;
        tgt[std::size_t(i)] = (i * 104729 + 1) % c.vocab_size;
    }
    std::printf("%-14s %10s %10s %10s %9s %9s %8s\n", "recipe", "ms/step", "tokens/s", "GFLOP/s", "of sgemm",
                "vs base", "loss");
    double base_ms = 0;
    std::size_t pos = 0;
    while (pos <= recipes.size()) {
        std::size_t end = std::min(recipes.find(',', pos), recipes.size());
        std::string name = recipes.substr(pos, end - pos);
        pos = end + 1;
        if (name.empty()) continue;
        model.set_recipe(training_recipe(name));
        float loss = 0;
        for (int s = 0; s < warmup; ++s) {
            loss = model.forward(tok.data(), tgt.data(), B, T);
            model.backward();
        }
        auto t0 = std::chrono::steady_clock::now();
        for (int s = 0; s < steps; ++s) {
            loss = model.forward(tok.data(), tgt.data(), B, T);
            model.backward();
        }
        double ms = seconds_since(t0) / std::max(steps, 1) * 1e3;
        if (name == "baseline") base_ms = ms;
        double gflops = step_flops(c, B, T) / (ms * 1e-3) * 1e-9;
        std::printf("%-14s %10.1f %10.0f %10.1f %8.0f%% %8s %8.4f\n", name.c_str(), ms, N / (ms * 1e-3), gflops,
                    100.0 * gflops / peak,
                    base_ms > 0 ? (std::to_string(int(100.0 * (ms / base_ms - 1) + 0.5)) + "%").c_str() : "-",
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
