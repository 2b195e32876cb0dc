// Per-step sums of device records (KernelStepRecord, /kernel_steps): what the recorder
// writes every step, and what the reader derives from the individual records of a trace
// from before the sums were written (format 5 and older), so both read the same.
#pragma once

#include <vector>

#include "trace_records.h"

namespace fp8scope::trace {

// The sums of `records` (device records of any runs and steps; host records are passed
// over) per step, run, kernel name, op and kind, in that order. A record with no op
// (parent -1: work outside every op scope, the recorder tags it run 0) belongs to the run
// of the next record of its step, in start time, that has an op; one after the step's
// last such record to that record's run (the Kernels view's rule, kernel_attribution.h).
// Every sum gets `detailed`.
std::vector<KernelStepRecord> sum_kernel_steps(std::vector<OpRecord> records, bool detailed);

}  // namespace fp8scope::trace
