// The Outliers view's gate/up alignment plot (trace::GateUpAlignmentRecord, a SwiGLU
// model's /gate_up_alignment): per MLP the largest |cos| of a channel's gate and up rows
// over the capture steps, and at the cursor the most aligned MLP with the channel that
// leads it and that channel's amax in fc2's input against the median channel's.
#pragma once

#include <cstdint>
#include <vector>

#include "models/run_data.h"
#include "stats/gate_up_alignment.h"  // kAlignedCos

namespace fp8scope::views {

struct AlignmentLine {
    int linear = 0;  // the MLP's fc1
    std::vector<double> step, max_abs_cos;  // step ascending
};

// One line per MLP of the run, in linear order; empty for a model without SwiGLU or a
// trace from before the table (format 6 and older).
std::vector<AlignmentLine> alignment_lines(const RunData& run);

// The row of the most aligned MLP (largest max |cos|) at the newest capture step <= step
// that has rows; nullptr when none.
const trace::GateUpAlignmentRecord* most_aligned_at(const RunData& run, std::int64_t step);

}  // namespace fp8scope::views
