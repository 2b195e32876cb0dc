// Op and kernel timings as Chrome trace event JSON (chrome://tracing, ui.perfetto.dev):
// "X" complete events in microseconds from the earliest exported one, one process per run
// and device ("<run> (CPU)", "<run> (GPU 0)"), one thread per stream. A kernel's event is
// named for reading (util/readable_kernel_name.h) with its full name in args "kernel".
// Args give the step, layer and linear, and for kernels the op they ran in, the operand
// and the bytes moved. A flow ("s" on the host op, "f" binding to the enclosing kernel
// slice, category "launch") joins each host op to the kernels it launched
// (kernel_launches.h). Counters ("C", one track per name in the run's CPU process, args
// {"value"}) carry per-step figures such as the loss, the learning rate and operands'
// amax and scale. `fp8scope-engine export --chrome-trace` and the GUI's export both write it.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "trace_records.h"

namespace fp8scope::trace {

struct ChromeCounter {
    std::string name;                                   // "loss", "amax L0 qkv fprop x"
    std::vector<std::pair<std::int64_t, double>> points;  // (host time ns, value); non-finite values are left out
};

struct ChromeTraceRun {
    int run = 0;                    // index into meta.runs
    std::span<const OpRecord> ops;  // the op and kernel records to export
    std::vector<ChromeCounter> counters = {};
};

std::string chrome_trace_json(const TraceMeta& meta, const std::vector<ChromeTraceRun>& runs);

// Each step's first start among `ops`: where a counter's value of that step goes.
std::map<std::int64_t, std::int64_t> step_starts(std::span<const OpRecord> ops);

// A counter of `field` of each step (loss, lr), at the start of the step's first record in
// `ops` (steps with no record are left out).
ChromeCounter step_counter(const std::string& name, std::span<const OpRecord> ops, std::span<const StepRecord> steps,
                           double StepRecord::*field);

}  // namespace fp8scope::trace
