// The kernel data a GPU run writes per step, before and after the per-step sums with
// windowed records (--kernel-timings): a synthetic stream shaped like a 6 x 1024 model's
// (~540 kernels, copies and memsets per run and step, in its ops, names and lengths),
// a four-run comparison, fed through the kernel recorder into the trace writer as the
// engine does. Prints the file bytes per step of:
//   before:  every record (format 5: --kernel-timings all without the sums);
//   all:     every record and the sums;
//   capture: the sums, and the records of capture steps only (the default; a non-capture
//            step writes its sums alone).
// Each figure is the trace's size less that of the same run without kernel timing, over
// the steps; no capture step is run, so capture's figure is a non-capture step's.
//
//   bench_kernel_window [--steps N] [--runs R] [--layers L] [--dir DIR]
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "kernel_recorder.h"
#include "trace_writer.h"

using namespace fp8scope;

namespace {

struct Shape {
    std::int64_t steps = 300;
    int runs = 4, layers = 6;
};

// Host op ids of the trace's op table, and the kernel names each launches.
const std::vector<std::string> kOps = {"fprop", "dgrad", "wgrad", "quantize", "attention", "norm", "optimizer",
                                       "embedding", "head", "loss", "eval"};

struct Launch {
    int op;  // index in kOps
    std::string name;
    KernelTiming::Kind kind;
    std::int64_t ns;
};

// One run's step: per layer 4 linears x 3 GEMMs with their casts and amax, attention,
// norms, residuals and activations; embedding, head and loss; AdamW and the gradient norm
// per parameter tensor; the batch's copies.
std::vector<Launch> step_launches(int layers) {
    std::vector<Launch> out;
    const auto K = KernelTiming::Kind::Kernel;
    out.push_back({7, "memcpy HtoD", KernelTiming::Kind::Memcpy, 4000});
    out.push_back({7, "embedding_forward_kernel<bf16>", K, 9000});
    for (int l = 0; l < layers; ++l) {
        for (const char* lin : {"qkv", "proj", "fc1", "fc2"}) {
            (void)lin;
            for (int g = 0; g < 3; ++g) {
                out.push_back({3, "fp8scope::cuda::qk::cast_fp8_kernel<bf16, e4m3>", K, 6000});
                out.push_back({3, "fp8scope::cuda::qk::amax_reduce_kernel<bf16>", K, 3000});
                out.push_back({3, "fp8scope::cuda::qk::cast_fp8_kernel<bf16, e5m2>", K, 6000});
                out.push_back({g, "nvjet_sm90_tst_256x128_64x4_2x1_v_bz_coopB_TNT", K, 90000});
                out.push_back({g, "memset", KernelTiming::Kind::Memset, 1500});
            }
        }
        for (const char* k : {"flash_fwd_kernel<bf16, 128>", "flash_bwd_dkdv_kernel<bf16, 128>", "flash_bwd_dq_kernel<bf16, 128>"})
            out.push_back({4, k, K, 120000});
        for (int n = 0; n < 4; ++n) out.push_back({5, n < 2 ? "rmsnorm_forward_kernel<bf16>" : "rmsnorm_backward_kernel<bf16>", K, 8000});
        for (int e = 0; e < 8; ++e) out.push_back({-1, e % 2 ? "binary_kernel<8, AddOp>" : "gelu_kernel<bf16>", K, 7000});
    }
    out.push_back({8, "nvjet_sm90_tst_128x256_64x4_2x1_v_bz_coopA_NNT", K, 400000});
    out.push_back({9, "softmax_cross_entropy_kernel<bf16>", K, 30000});
    for (int p = 0; p < layers * 8 + 3; ++p) {
        out.push_back({6, "sum_squares_kernel<bf16>", K, 2000});
        out.push_back({6, "adamw_kernel<bf16, float>", K, 25000});
    }
    out.push_back({-1, "memcpy DtoH", KernelTiming::Kind::Memcpy, 3000});
    return out;
}

trace::TraceMeta meta_of(const Shape& s, const std::string& mode) {
    trace::TraceMeta m;
    m.tool_version = "bench";
    for (int r = 0; r < s.runs; ++r) m.runs.push_back({"run" + std::to_string(r), "current"});
    m.training_recipes = {"current"};
    m.ops = kOps;
    m.kernel_timings = mode;
    return m;
}

// Writes the run; `mode` empty: no kernel timing. Returns the file's size and counts.
struct Written {
    std::uintmax_t bytes = 0;
    std::int64_t records = 0, summed = 0, kernels_per_step = 0;
};

Written write_run(const std::string& path, const Shape& s, const std::string& mode, bool sums = true) {
    const trace::TraceMeta meta = meta_of(s, mode);
    trace::TraceWriter w(path, meta);
    // Before the sums (format 5): every record straight to the file.
    struct RecordsOnly : trace::RecordSink {
        trace::RecordSink& to;
        explicit RecordsOnly(trace::RecordSink& t) : to(t) {}
        void write(trace::Record r) override {
            if (!std::holds_alternative<trace::KernelStepRecord>(r)) to.write(std::move(r));
        }
    } records_only(w);
    trace::RecordSink& sink = sums ? static_cast<trace::RecordSink&>(w) : records_only;
    trace::OpNames names(meta.ops);
    trace::KernelRecorder k(sink, names, trace::KernelPolicy::parse(mode.empty() ? "all" : mode));
    const std::vector<Launch> launches = step_launches(s.layers);
    std::mt19937 rng(1);
    std::uniform_real_distribution<double> jitter(0.9, 1.1);
    std::vector<KernelTiming> batch;
    std::uint64_t scope = 0;
    std::int64_t t = 0;
    for (std::int64_t step = 1; step <= s.steps; ++step) {
        k.begin_step(step, false);
        for (int run = 0; run < s.runs; ++run) {
            batch.clear();
            for (const Launch& l : launches) {
                std::uint64_t sc = 0;
                if (l.op >= 0) {
                    trace::OpRecord host;
                    host.run = run, host.step = step, host.op = l.op;
                    k.note_scope(sc = ++scope, host);
                }
                const auto ns = static_cast<std::int64_t>(static_cast<double>(l.ns) * jitter(rng));
                batch.push_back({l.kind, l.name, 0, 7, t, t + ns, l.kind == KernelTiming::Kind::Kernel ? 0 : 1 << 20, sc});
                t += ns + 800;
            }
            if (!mode.empty()) k.on_kernels(batch.data(), batch.size());
            w.write(trace::StepRecord{run, step, 5.0, NAN, 1e-3, 1.0, 150.0, 5e4, 0});
        }
    }
    k.flush();
    w.close();
    return {std::filesystem::file_size(path), k.recorded(), k.summed(), static_cast<std::int64_t>(launches.size())};
}

}  // namespace

int main(int argc, char** argv) {
    Shape s;
    std::string dir = std::filesystem::temp_directory_path().string();
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string a = argv[i];
        if (a == "--steps") s.steps = std::stoll(argv[i + 1]);
        else if (a == "--runs") s.runs = std::stoi(argv[i + 1]);
        else if (a == "--layers") s.layers = std::stoi(argv[i + 1]);
        else if (a == "--dir") dir = argv[i + 1];
        else {
            std::fprintf(stderr, "usage: bench_kernel_window [--steps N] [--runs R] [--layers L] [--dir DIR]\n");
            return 2;
        }
    }
    const std::string base = dir + "/bench_kernel_window_" + std::to_string(::getpid());
    const auto t0 = std::chrono::steady_clock::now();
    const Written none = write_run(base + "_none.h5", s, "");
    const Written before = write_run(base + "_before.h5", s, "all", false);
    const Written all = write_run(base + "_all.h5", s, "all");
    const Written capture = write_run(base + "_capture.h5", s, "capture");
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (const char* f : {"_none.h5", "_before.h5", "_all.h5", "_capture.h5"}) std::filesystem::remove(base + f);

    const auto per_step = [&](const Written& w) {
        return static_cast<double>(w.bytes - none.bytes) / static_cast<double>(s.steps);
    };
    std::printf("kernel data per step: %d runs x %lld kernels, copies and memsets (%d layers), %lld steps\n", s.runs,
                static_cast<long long>(before.kernels_per_step), s.layers, static_cast<long long>(s.steps));
    std::printf("  before (every record, format 5):  %9.0f bytes/step  (%lld records)\n", per_step(before),
                static_cast<long long>(before.records));
    std::printf("  all (every record and the sums):  %9.0f bytes/step\n", per_step(all));
    std::printf("  capture, a non-capture step:      %9.0f bytes/step  (sums only; %.0fx smaller than before)\n",
                per_step(capture), per_step(before) / per_step(capture));
    const double day = 650000;  // steps of a day at 0.13 s
    std::printf("  a day of %0.f steps: before %.1f GB, capture %.2f GB (plus its capture steps' records)\n", day,
                per_step(before) * day * 1e-9, per_step(capture) * day * 1e-9);
    std::printf("  (%lld of %lld timed records kept by capture; written in %.1f s)\n",
                static_cast<long long>(capture.records), static_cast<long long>(capture.summed), secs);
    return 0;
}
