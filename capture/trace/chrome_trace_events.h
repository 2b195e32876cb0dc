// Op and kernel timings as Chrome trace event JSON (chrome://tracing, ui.perfetto.dev):
// "X" complete events in microseconds from the earliest exported one, one process per run
// and device ("<run> (CPU)", "<run> (GPU 0)"), one thread per stream. Args give the step,
// layer and linear, and for kernels the op they ran in, the operand and the bytes moved.
// `fp8scope-engine export --chrome-trace` and the GUI's export both write it.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "trace_records.h"

namespace fp8scope::trace {

struct ChromeTraceRun {
    int run = 0;                    // index into meta.runs
    std::span<const OpRecord> ops;  // the op and kernel records to export
};

std::string chrome_trace_json(const TraceMeta& meta, const std::vector<ChromeTraceRun>& runs);

}  // namespace fp8scope::trace
