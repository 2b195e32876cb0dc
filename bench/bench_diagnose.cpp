// How long diagnose() takes on a large trace (goal: a 500 MB trace in under 10 s), opening
// and reading included, and how many findings it gave.
//
//   bench_diagnose TRACE                 diagnose a trace (e.g. one of train --out with many steps)
//   bench_diagnose --write [--mb N] [--dir DIR] [--keep 1]
//                                        write a trace of N MB (default 500) with the TraceWriter,
//                                        then diagnose it
//
// The written trace has the shape of a four-run comparison of a Llama-style model (16
// blocks of qkv, proj, SwiGLU fc1 and fc2 at width 1024, hidden 2816): scaling every step,
// operands with their channel absmax, histogram and error under 12 quantizers every 100
// steps, GEMM output errors and gate/up alignments at the same steps, the per-step kernel
// sums of 40 kernels, and figures that wander as a run's do (seeded noise; one operand's
// SQNR falls in the last tenth), so the rules have work to do.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>

#include "finding.h"
#include "trace_reader.h"
#include "trace_writer.h"

using namespace fp8scope;
using Clock = std::chrono::steady_clock;

namespace {

constexpr int kRuns = 4, kBlocks = 16, kWidth = 1024, kHidden = 2816, kTokens = 2048, kKernels = 40;
constexpr std::int64_t kCaptureEvery = 100;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

trace::TraceMeta meta() {
    trace::TraceMeta m;
    m.tool_version = "bench";
    m.config_json = R"({"model": {"arch": "llama"}, "schedule": {"warmup_steps": 100}})";
    for (const char* r : {"baseline", "delayed", "blockwise", "mxfp8"}) m.runs.push_back({r, r});
    m.training_recipes = {"baseline", "delayed", "blockwise", "mxfp8"};
    for (int b = 0; b < kBlocks; ++b) {
        const std::string p = "blocks." + std::to_string(b) + ".";
        m.linears.push_back({p + "attn.qkv", b, kWidth, 3 * kWidth});
        m.linears.push_back({p + "attn.proj", b, kWidth, kWidth});
        m.linears.push_back({p + "mlp.fc1", b, kWidth, 2 * kHidden});
        m.linears.push_back({p + "mlp.fc2", b, kHidden, kWidth});
    }
    m.quantizers = {"current_e4m3",          "current_e5m2",         "delayed_e4m3:history=16", "delayed_e5m2:history=16",
                    "block1x128_e4m3_pow2",  "block128x128_e4m3_pow2", "mxfp8_e4m3_rceil",      "mxfp8_e5m2_rceil",
                    "block1x128_e5m2_pow2",  "current_e4m3_pow2",    "mxfp8_e4m3",              "nvfp4"};
    for (int k = 0; k < kKernels; ++k) m.ops.push_back("kernel" + std::to_string(k));
    m.capture_every = kCaptureEvery;
    return m;
}

// The quantizer a run trains an operand with: delayed, blockwise, mxfp8 (baseline: none).
int in_use(int run, Operand o) {
    const bool e5m2 = o == Operand::DY;
    switch (run) {
        case 1: return e5m2 ? 3 : 2;
        case 2: return e5m2 ? 8 : 4;
        case 3: return e5m2 ? 7 : 6;
        default: return -1;
    }
}

// The width of an operand's channels (its contraction dimension, last).
int channels(const LinearInfo& l, Gemm g) {
    return g == Gemm::Fprop ? l.in_features : g == Gemm::Dgrad ? l.out_features : kTokens;
}

struct Writer {
    trace::TraceWriter& w;
    const trace::TraceMeta& m;
    std::mt19937 rng{12345};
    std::normal_distribution<double> noise{0.0, 1.0};
    std::int64_t last_step = 0;

    double n() { return noise(rng); }

    void capture(int run, std::int64_t step, double fraction) {
        for (int l = 0; l < int(m.linears.size()); ++l) {
            const LinearInfo& info = m.linears[std::size_t(l)];
            for (Gemm g : {Gemm::Fprop, Gemm::Dgrad, Gemm::Wgrad})
                for (Operand o : {Operand::X, Operand::W, Operand::DY}) {
                    if (trace::operand_slot(l, g, o) < 0) continue;
                    trace::OperandRecord r;
                    r.key = {run, step, l, g, o};
                    r.quantizer_in_use = in_use(run, o);
                    r.scale = 448.0 / (2 + 0.1 * n());
                    r.stats.numel = std::int64_t(channels(info, g)) * kTokens;
                    r.stats.finite = r.stats.numel;
                    r.stats.amax = 2 * std::exp(0.05 * n());
                    r.stats.rms = 0.1;
                    r.stats.outliers.kurtosis = 4 + 0.3 * n();
                    for (int e = -30; e < 2; ++e)
                        r.stats.histogram.bins[std::size_t(e - kHistMinExp)] = std::int64_t(1e5 * std::exp(-0.02 * (e + 8) * (e + 8)));
                    r.stats.outliers.channel_absmax.resize(std::size_t(channels(info, g)));
                    for (float& c : r.stats.outliers.channel_absmax) c = float(std::exp(0.3 * n()));
                    for (int k = 0; k < 16; ++k) r.stats.outliers.top.push_back({float(2 - 0.01 * k), k, 3 * k});
                    // One operand loses precision in the last tenth of the run.
                    const bool drifting = run == 1 && l == 7 && g == Gemm::Fprop && o == Operand::X && fraction > 0.9;
                    for (std::size_t q = 0; q < m.quantizers.size(); ++q) {
                        ErrorStats e;
                        e.amax = r.stats.amax;
                        e.sqnr_db = 31 - 6 * (q % 2) + 0.3 * n() - (drifting && int(q) == r.quantizer_in_use ? 12 : 0);
                        e.mse = 1e-3 * std::pow(10, -e.sqnr_db / 10);
                        e.rel_l2 = std::pow(10, -e.sqnr_db / 20);
                        e.cosine = 1 - e.rel_l2 * e.rel_l2 / 2;
                        e.underflow_pct = 2 + 0.2 * n();
                        e.overflow_pct = std::max(0.0, 1e-4 * n());
                        r.errors.push_back(e);
                    }
                    if (run == 1) r.amax_history.assign(16, float(r.stats.amax));
                    w.write(std::move(r));
                }
            for (Gemm g : {Gemm::Fprop, Gemm::Dgrad, Gemm::Wgrad})
                w.write(trace::GemmErrorRecord{run, step, l, g, run == 0 ? INFINITY : 28 + 0.3 * n(), 0.04, 0.01});
            if (info.name.ends_with("mlp.fc1")) {
                trace::GateUpAlignmentRecord a;
                a.run = run, a.step = step, a.linear = l, a.channels = kHidden;
                a.mean_abs_cos = 0.025, a.p99_abs_cos = 0.07, a.max_abs_cos = 0.1 + 0.005 * n();
                a.top_channel = 17, a.top_cos = 0.09, a.top_norm_product = 1.2, a.top_down_amax = 3, a.down_amax_median = 1;
                w.write(a);
            }
        }
    }

    void step(std::int64_t step, double fraction) {
        const int slots = int(m.linears.size()) * trace::kOperandsPerLinear;
        for (int run = 0; run < kRuns; ++run) {
            trace::ScalingRecord sc{run, step, std::vector<float>(std::size_t(slots)), std::vector<float>(std::size_t(slots))};
            for (int s = 0; s < slots; ++s) {
                sc.amax[std::size_t(s)] = float(2 * std::exp(0.05 * n()));
                sc.scale[std::size_t(s)] = run == 1 ? float(448 / 2.2) : NAN;
            }
            w.write(std::move(sc));
            if ((step - 1) % kCaptureEvery == 0) capture(run, step, fraction);
            for (int k = 0; k < kKernels; ++k)
                w.write(trace::KernelStepRecord{run, step, k, -1, trace::OpKind::Kernel, 0, 20, 20000, 900, 1100, 0});
            w.write(trace::StepRecord{run, step, 3 + 2 * std::exp(-double(step) / 2000) + 0.002 * run + 0.01 * n(), NAN,
                                      1e-3, 1.0, 120.0, 4e5, run});
        }
        last_step = step;
    }
};

// Steps until the file reaches `mb` MB (checked at each capture step, after a flush).
void write_trace(const std::string& path, double mb) {
    const trace::TraceMeta m = meta();
    trace::TraceWriter w(path, m);
    Writer gen{w, m};
    // The size per capture interval, from the first one, sets the run's length.
    std::int64_t total = 0;
    for (std::int64_t step = 1;; ++step) {
        gen.step(step, total ? double(step) / double(total) : 0.0);
        if (step % kCaptureEvery != 0) continue;
        w.flush();
        const double now = double(std::filesystem::file_size(path)) / 1e6;
        if (!total) total = std::int64_t(std::ceil(mb / now)) * step;
        if (now >= mb || step >= total) break;
    }
    w.close();
}

int diagnose_file(const std::string& path) {
    const auto t0 = Clock::now();
    const trace::TraceReader reader(path);
    const auto t1 = Clock::now();
    const auto found = diagnose::diagnose(reader);
    const auto t2 = Clock::now();
    const double mb = double(std::filesystem::file_size(path)) / 1e6;
    std::int64_t steps = 0, captures = 0;
    for (int run = 0; run < int(reader.meta().runs.size()); ++run) {
        steps = std::max(steps, reader.last_step(run));
        captures = std::max(captures, std::int64_t(reader.capture_steps(run).size()));
    }
    std::printf("trace %.1f MB (%lld steps, %lld capture steps, %zu runs, %zu linears): open %.3f s, diagnose %.3f s, "
                "%zu findings\n",
                mb, (long long)steps, (long long)captures, reader.meta().runs.size(), reader.meta().linears.size(),
                std::chrono::duration<double>(t1 - t0).count(), std::chrono::duration<double>(t2 - t1).count(),
                found.size());
    for (std::size_t i = 0; i < found.size() && i < 5; ++i)
        std::printf("  %zu. %s %.0f: %s\n", i + 1, found[i].kind.c_str(), found[i].score, found[i].summary.c_str());
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc == 2 && std::string(argv[1]) != "--write") return diagnose_file(argv[1]);
    if (argc < 2 || std::string(argv[1]) != "--write") {
        std::fprintf(stderr, "usage: bench_diagnose TRACE | bench_diagnose --write [--mb N] [--dir DIR] [--keep 1]\n");
        return 2;
    }
    double mb = 500;
    std::string dir = std::filesystem::temp_directory_path().string();
    bool keep = false;
    for (int i = 2; i + 1 < argc; i += 2) {
        const std::string a = argv[i], v = argv[i + 1];
        if (a == "--mb") mb = std::atof(v.c_str());
        else if (a == "--dir") dir = v;
        else if (a == "--keep") keep = v != "0";
        else {
            std::fprintf(stderr, "unknown option %s\n", a.c_str());
            return 2;
        }
    }
    const std::string path = dir + "/bench_diagnose.h5";
    const auto t0 = Clock::now();
    write_trace(path, mb);
    std::printf("written in %.1f s: %s\n", seconds_since(t0), path.c_str());
    const int rc = diagnose_file(path);
    if (!keep) std::filesystem::remove(path);
    return rc;
}
