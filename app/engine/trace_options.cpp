#include "trace_options.h"

#include <cstdint>
#include <random>

namespace fp8scope::cli {

void add_trace_options(CLI::App& cmd, TraceOptions& o) {
    cmd.add_option("--out", o.out, "Write an HDF5 trace (SWMR: readable while the run goes on)");
    cmd.add_option("--blockmap-every", o.blockmap_every, "Steps between block maps (default 10 x capture interval)");
    cmd.add_option("--flush-ms", o.flush_ms, "Milliseconds between trace flushes")->check(CLI::Range(1, 60000));
    cmd.add_option("--kernel-timings", o.kernel_timings,
                   "The GPU's kernels, copies and memsets (CUPTI): every step's sums per kernel and op are "
                   "recorded; the individual records on every step (all), on capture steps and around events "
                   "(capture), on steps 1, 1+N, ... and around events (every=N), or no kernel timing (off)")
        ->check([](const std::string& v) {
            try {
                trace::KernelPolicy::parse(v);
                return std::string();
            } catch (const std::invalid_argument& e) {
                return std::string(e.what());
            }
        })
        ->capture_default_str();
    cmd.add_flag_callback("--no-kernel-timings", [&o] { o.kernel_timings = "off"; },
                          "No kernel timing (--kernel-timings off)");
    cmd.add_option("--kernel-window", o.kernel_window,
                   "Steps before and after a loss spike, rewind, non-finite value or health alert whose kernel "
                   "records are kept (capture, every=N)")
        ->check(CLI::Range(0LL, 100000LL))
        ->capture_default_str();
    cmd.add_option("--on-trace-error", o.on_error,
                   "When the trace cannot be written (a full disk): stop training cleanly at the next step, with "
                   "its checkpoint, or continue without the trace; either way the exit status is 1")
        ->check(CLI::IsMember({"stop", "continue"}))
        ->capture_default_str();
}

trace::KernelPolicy kernel_policy(const TraceOptions& o) {
    return trace::KernelPolicy::parse(o.kernel_timings, o.kernel_window);
}

std::string random_token() {
    std::random_device rd;
    static const char* hex = "0123456789abcdef";
    std::string t;
    for (int i = 0; i < 4; ++i) {
        std::uint32_t v = rd();
        for (int j = 0; j < 8; ++j, v >>= 4) t += hex[v & 15];
    }
    return t;
}

}  // namespace fp8scope::cli
