// Which host op launched each device record: the flows of a timeline (op -> kernels).
// The kernel recorder tags a kernel with the step, op, linear, layer and operand of the op
// scope it was launched in, but not with the op's record; of the host records with those
// tags, the launcher is the latest to start at or before the kernel (a kernel starts after
// its launch; an op name recurs within a step only as forward and backward, far apart).
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "trace_records.h"

namespace fp8scope::trace {

// For each record of `records` (one run's), the index in `records` of the host op that
// launched it; -1 for host records and for device records with no op or no such record.
std::vector<std::ptrdiff_t> launching_ops(std::span<const OpRecord> records);

}  // namespace fp8scope::trace
