// The command line of what `train` records: --out and its settings, and the token a TCP
// listener gets when none is given. The recording itself is capture's RunRecording.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "kernel_recorder.h"

namespace fp8scope::cli {

// Capture interval of a traced or served run whose config says never: full statistics
// under every recipe cost about two training steps on the CPU (bench_capture_overhead),
// so one in 100 steps keeps capture near 1% of the step time.
inline constexpr int kDefaultCaptureEvery = 100;

struct TraceOptions {
    std::string out;                // HDF5 trace file ("" : none)
    long long blockmap_every = -1;  // -1: 10 x capture interval
    int flush_ms = 500;
    // --kernel-timings: which steps keep every kernel's record beside the sums every step
    // gets (all | capture | every=N | off; --no-kernel-timings is off).
    std::string kernel_timings = "capture";
    long long kernel_window = 5;  // --kernel-window: steps kept before and after an event
    std::string on_error = "stop";  // --on-trace-error: stop | continue
};

void add_trace_options(CLI::App& cmd, TraceOptions& o);

// The kernel record policy of --kernel-timings and --kernel-window; throws
// std::invalid_argument naming a value it cannot read.
trace::KernelPolicy kernel_policy(const TraceOptions& o);

// A random token for TCP (32 hex digits from the system's random source).
std::string random_token();

}  // namespace fp8scope::cli
