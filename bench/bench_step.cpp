// A whole training step on a backend (forward, backward, gradient norm and clipping,
// AdamW), per training recipe, timed as the trainer runs it: the host reads the loss and
// the gradient norm, so every step ends with the device idle. Prints ms per step, tokens/s,
// the speed-up over the baseline recipe and the model FLOP utilisation.
//
// FLOPs per step (PaLM's convention, so figures compare with other reports): 6 * tokens *
// (parameters of the linears and the head) + 12 * layers * C * T * tokens for attention
// (the full T x T product, as if not causal). MFU divides by the dense BF16 peak given
// with --peak (TFLOP/s; 989 for an H100/H200 SXM, the datasheet's figure), for every recipe:
// an FP8 recipe's MFU above the BF16 one is its real gain.
//
// --phases 1 times as many steps again with the device drained after each phase
// (forward with the loss, backward, gradient norm, AdamW) and prints their medians:
// how the step's time splits, and (their sum against the step) what the drains cost.
// Where the backend traces kernels (CUDA: CUPTI), each phase's device time is printed
// beside it: the difference is time the device sat idle, waiting for the host.
//
// --kernels N traces 3 more steps per recipe and prints where their device time went: the
// N longest kernels (summed per name), per step.
//
// --config FILE takes the model, sequence length and batch of a run config or preset
// (resources/configs/presets/llama-8x4096.json: the Llama-style twin of the default
// model); --arch llama, --kv-heads N and the shape flags after it change them.
//
// usage: bench_step [--device cuda] [--config FILE] [--layers 8] [--width 4096] [--heads 32]
//                   [--kv-heads 0] [--arch gpt|llama] [--vocab 50304]
//                   [--seq 2048] [--batch 4] [--steps 10] [--warmup 3] [--mlp gelu|swiglu]
//                   [--recipes baseline,current,delayed,blockwise,mxfp8] [--peak 989] [--threads 0]
//                   [--phases 0|1] [--kernels 0]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "backends.h"
#include "engine/model.h"
#include "engine/optimizer.h"
#include "engine/train_config.h"
#include "kernel_tally.h"

using namespace fp8scope;

namespace {

double model_flops(const ModelConfig& c, int B, int T) {
    const double tokens = double(B) * T, C = c.d_model, H = c.hidden(), V = c.vocab_size;
    const double H1 = c.mlp == MlpKind::SwiGLU ? 2 * H : H;
    const double linear_params = (C * c.qkv_width() + C * C + C * H1 + H * C) * c.n_layer + C * V;
    return 6.0 * tokens * linear_params + 12.0 * c.n_layer * C * T * tokens;
}

std::vector<std::string> split(const std::string& list) {
    std::vector<std::string> out;
    std::size_t pos = 0;
    while (pos <= list.size()) {
        std::size_t end = std::min(list.find(',', pos), list.size());
        if (end > pos) out.push_back(list.substr(pos, end - pos));
        pos = end + 1;
    }
    return out;
}

}  // namespace

int main(int argc, char** argv) {
    ModelConfig c;
    c.n_layer = 8;
    c.d_model = 4096;
    c.n_head = 32;
    c.vocab_size = 50304;
    std::string device = "cuda", recipes = "baseline,current,delayed,blockwise,mxfp8";
    int B = 4, T = 2048, steps = 10, warmup = 3, threads = 0, kernels = 0;
    bool phases = false;
    double peak = 989;
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string k = argv[i];
        const char* v = argv[i + 1];
        if (k == "--device") device = v;
        else if (k == "--config") {
            try {
                const TrainConfig run = load_train_config(v);
                c = run.model;
                T = run.seq_len;
                B = run.batch_size;
            } catch (const std::exception& e) {
                std::fprintf(stderr, "bench_step: %s\n", e.what());
                return 1;
            }
        } else if (k == "--arch") {
            try {
                apply_arch(c, v);
            } catch (const std::exception& e) {
                std::fprintf(stderr, "bench_step: --arch: %s\n", e.what());
                return 2;
            }
        } else if (k == "--kv-heads") c.n_kv_head = std::atoi(v);
        else if (k == "--layers") c.n_layer = std::atoi(v);
        else if (k == "--width") c.d_model = std::atoi(v);
        else if (k == "--heads") c.n_head = std::atoi(v);
        else if (k == "--vocab") c.vocab_size = std::atoi(v);
        else if (k == "--seq") T = std::atoi(v);
        else if (k == "--batch") B = std::atoi(v);
        else if (k == "--steps") steps = std::atoi(v);
        else if (k == "--warmup") warmup = std::atoi(v);
        else if (k == "--mlp") c.mlp = std::string(v) == "swiglu" ? MlpKind::SwiGLU : MlpKind::GELU;
        else if (k == "--recipes") recipes = v;
        else if (k == "--peak") peak = std::atof(v);
        else if (k == "--threads") threads = std::atoi(v);
        else if (k == "--phases") phases = std::atoi(v) != 0;
        else if (k == "--kernels") kernels = std::atoi(v);
        else {
            std::fprintf(stderr, "unknown option %s\n", k.c_str());
            return 2;
        }
    }
    c.max_seq = std::max(c.max_seq, T);
    std::unique_ptr<Backend> backend;
    try {
        backend = make_backend(device, threads);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bench_step: %s\n", e.what());
        return 1;
    }
    std::printf("%s\n", backend->describe().c_str());
    const double flops = model_flops(c, B, T);
    std::printf("model L=%d C=%d NH=%d KV=%d V=%d %s %s %s, B=%d T=%d: %.1f TFLOP per step (model FLOPs), %d steps "
                "after %d\n",
                c.n_layer, c.d_model, c.n_head, c.kv_heads(), c.vocab_size, c.mlp == MlpKind::SwiGLU ? "swiglu" : "gelu",
                c.norm == NormKind::RMSNorm ? "rmsnorm" : "layernorm", c.pos == PosKind::Rope ? "rope" : "learned", B, T,
                flops * 1e-12, steps, warmup);

    Model model(c, *backend);
    model.init(1);
    OptimizerConfig oc;
    AdamW adam(oc, model.param_tensors(), model.num_params(), *backend);
    std::printf("%.2f B parameters\n", double(model.num_params()) * 1e-9);
    std::vector<std::int32_t> tok(std::size_t(B) * T), tgt(tok.size());
    for (std::size_t i = 0; i < tok.size(); ++i) {
        tok[i] = std::int32_t((i * 7919) % std::size_t(c.vocab_size));
        tgt[i] = std::int32_t((i * 104729 + 1) % std::size_t(c.vocab_size));
    }

    std::printf("%-10s %10s %10s %11s %9s %8s %9s\n", "recipe", "ms/step", "min ms", "tokens/s", "vs base",
                "MFU", "loss");
    double base_ms = 0;
    for (const std::string& name : split(recipes)) {
        // Every recipe starts from the same weights and optimizer state.
        model.init(1);
        adam.reset();
        model.set_recipe(training_recipe(name));
        float loss = 0;
        std::vector<double> ms;
        auto step = [&] {
            loss = model.forward(tok.data(), tgt.data(), B, T);
            model.backward();
            const double norm = backend->grad_norm(model.grads().data(), std::int64_t(model.num_params()));
            adam.step(model.params(), model.grads(), 1e-5f, clip_factor(norm, oc.grad_clip));
            backend->synchronize();
        };
        for (int s = 0; s < warmup + steps; ++s) {
            const auto t0 = std::chrono::steady_clock::now();
            step();
            if (s >= warmup) ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
        }
        std::sort(ms.begin(), ms.end());
        const double median = ms[ms.size() / 2];
        if (name == "baseline") base_ms = median;
        const double tflops = flops / (median * 1e-3) * 1e-12;
        char vs[16] = "-";
        if (base_ms > 0 && name != "baseline") std::snprintf(vs, sizeof vs, "%.2fx", base_ms / median);
        std::printf("%-10s %10.1f %10.1f %11.0f %9s %7.1f%% %9.4f\n", name.c_str(), median, ms.front(),
                    double(B) * T / (median * 1e-3), vs, 100.0 * tflops / peak, loss);
        if (phases) {
            std::vector<double> t[4], busy[4];
            bench::KernelTally device_busy;  // of the phase, reset at each lap
            const bool traced = backend->trace_kernels(&device_busy).empty();
            for (int s = 0; s < steps; ++s) {
                auto t0 = std::chrono::steady_clock::now();
                auto lap = [&](int i) {
                    backend->synchronize();
                    const auto now = std::chrono::steady_clock::now();
                    t[i].push_back(std::chrono::duration<double, std::milli>(now - t0).count());
                    backend->flush_kernels();
                    busy[i].push_back(device_busy.total_ms());
                    device_busy.reset(1);
                    t0 = std::chrono::steady_clock::now();
                };
                model.forward(tok.data(), tgt.data(), B, T);
                lap(0);
                model.backward();
                lap(1);
                const double norm = backend->grad_norm(model.grads().data(), std::int64_t(model.num_params()));
                lap(2);
                adam.step(model.params(), model.grads(), 1e-5f, clip_factor(norm, oc.grad_clip));
                lap(3);
            }
            if (traced) backend->trace_kernels(nullptr);
            static const char* const kPhase[4] = {"forward", "backward", "norm", "adamw"};
            double sum = 0;
            std::printf("  phases (median ms%s):", traced ? ", device time in brackets" : "");
            for (int i = 0; i < 4; ++i) {
                std::sort(t[i].begin(), t[i].end());
                std::sort(busy[i].begin(), busy[i].end());
                sum += t[i][t[i].size() / 2];
                std::printf(" %s %.1f", kPhase[i], t[i][t[i].size() / 2]);
                if (traced) std::printf(" (%.1f)", busy[i][busy[i].size() / 2]);
            }
            std::printf(", sum %.1f\n", sum);
        }
        if (kernels > 0) {
            constexpr int kTraced = 3;
            bench::KernelTally tally;
            tally.reset(kTraced);
            const std::string why = backend->trace_kernels(&tally);
            if (why.empty()) {
                for (int s = 0; s < kTraced; ++s) step();
                backend->flush_kernels();
                backend->trace_kernels(nullptr);
                std::printf("  device time %.1f ms per step:\n", tally.total_ms());
                tally.print("  ", std::size_t(kernels));
            } else {
                std::printf("  (no kernel breakdown: %s)\n", why.c_str());
            }
        }
        std::fflush(stdout);
    }
    return 0;
}
