// Which run's step a device record belongs to. The kernel recorder tags a kernel with
// the run, step and op of the op scope it was launched in; work outside every op (the
// residual adds, the batch's copies) and, in traces written before the engine recorded
// an "eval" op, the evaluation after a step, come with no op and the first run's index.
// They are put back here by time, from the trace's own timing records:
//   - a record with no op belongs to the run of the next kernel, in device time, that
//     has an op (within the step: the batch copy before a run's forward is that run's,
//     a residual add between two of its kernels is that run's);
//   - records with no op after the step's last kernel with an op are the step's
//     evaluation when the step recorded an eval loss and no "eval" op ran (older
//     traces): the runs evaluate one after another, each on the same number of held-out
//     batches, each batch a forward that starts with the embedding kernel, so the block
//     is split at the embedding kernel that starts run r's first batch (with the copies
//     just before it). Otherwise they are the last run's (the step's snapshot copies).
// Kernels launched inside an "eval" op are eval records too.
#pragma once

#include <cstdint>
#include <vector>

#include "models/kernel_kind.h"
#include "models/run_data.h"

namespace fp8scope::views {

struct StepKernel {
    trace::OpRecord rec;  // run and step as attributed
    bool eval = false;    // ran in the run's evaluation after the step
};

// The device records of `run` at `step`, start ascending.
std::vector<StepKernel> step_kernels(const TraceData& d, int run, std::int64_t step);

// The id of the "eval" op in meta.ops, -1 when the trace has none.
int eval_op_id(const trace::TraceMeta& meta);

// A step's kernel sum as a device record of its name, op and kind (no layer, linear or
// times: the grouping and filters by kind of the Kernels view take it as they take a
// record); eval when it ran in the "eval" op.
StepKernel summed_kernel(const trace::TraceMeta& meta, const trace::KernelStepRecord& k);

}  // namespace fp8scope::views
