// Rewriting a trace of any format in today's (docs/trace-format.md, "Storage"): deflated
// chunks, channel absmax and the block maps' absmax and SQNR in bfloat16, and the per-step
// kernel sums (/kernel_steps; made from the records of a file from before them). Every record is
// read with TraceReader and written with TraceWriter, then the two files are read again
// and compared, so a trace that shrinks is one that reads back the same.
#pragma once

#include <cstdint>
#include <string>

namespace fp8scope::trace {

struct CompactCounts {
    std::uint64_t steps = 0, events = 0, scaling = 0, operands = 0, blockmaps = 0, ops = 0, ranks = 0,
                  gemm_errors = 0, kernel_steps = 0, gate_up = 0;
};

// Writes `in` to `out` in the current format. Throws TraceError when `in` cannot be read,
// when `out` is `in` (by path or as the same file), or when `out` cannot be written.
CompactCounts compact_trace(const std::string& in, const std::string& out);

// The first difference between the records of traces `a` and `b` ("" when none): the same
// meta, steps, events, scaling, operands, block maps, ops, kernel sums, rank steps, GEMM errors and gate/up alignments,
// every figure equal except those stored in bfloat16, which may differ from `a`'s by
// bfloat16's rounding (at most 2^-8 of the value). Throws TraceError when a file is bad.
std::string compare_traces(const std::string& a, const std::string& b);

}  // namespace fp8scope::trace
