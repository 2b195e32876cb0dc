// The command line of what `train` records: --out and its settings, and the token a TCP
// listener gets when none is given. The recording itself is capture's RunRecording.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace fp8scope::cli {

// Capture interval of a traced or served run whose config says never: full statistics
// under every recipe cost about two training steps on the CPU (bench_capture_overhead),
// so one in 100 steps keeps capture near 1% of the step time.
inline constexpr int kDefaultCaptureEvery = 100;

struct TraceOptions {
    std::string out;                // HDF5 trace file ("" : none)
    long long blockmap_every = -1;  // -1: 10 x capture interval
    int flush_ms = 500;
    bool kernel_timings = true;  // --no-kernel-timings turns the GPU's kernel records off
    std::string on_error = "stop";  // --on-trace-error: stop | continue
};

void add_trace_options(CLI::App& cmd, TraceOptions& o);

// A random token for TCP (32 hex digits from the system's random source).
std::string random_token();

}  // namespace fp8scope::cli
