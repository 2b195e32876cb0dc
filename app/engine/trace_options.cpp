#include "trace_options.h"

#include <cstdint>
#include <random>

namespace fp8scope::cli {

void add_trace_options(CLI::App& cmd, TraceOptions& o) {
    cmd.add_option("--out", o.out, "Write an HDF5 trace (SWMR: readable while the run goes on)");
    cmd.add_option("--blockmap-every", o.blockmap_every, "Steps between block maps (default 10 x capture interval)");
    cmd.add_option("--flush-ms", o.flush_ms, "Milliseconds between trace flushes")->check(CLI::Range(1, 60000));
    cmd.add_flag("!--no-kernel-timings", o.kernel_timings,
                 "Do not record the GPU's kernels, copies and memsets (CUPTI) in the trace");
    cmd.add_option("--on-trace-error", o.on_error,
                   "When the trace cannot be written (a full disk): stop training cleanly at the next step, with "
                   "its checkpoint, or continue without the trace; either way the exit status is 1")
        ->check(CLI::IsMember({"stop", "continue"}))
        ->capture_default_str();
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
