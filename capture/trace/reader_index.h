// The row index of the trace reader: the step, event and rank records, and the rows of
// the operand, block-map, scaling and op tables by (run, step), built once when a file
// opens, then for the rows a growing file added (refresh). Every id a row holds is checked
// against /meta before the row is indexed.
#pragma once

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "reader_file.h"

namespace fp8scope::trace {

// A key of the (run, step) indexes.
using RunStep = std::pair<std::int32_t, std::int64_t>;

struct TraceIndex {
std::vector<StepRecord> step_records;
std::vector<EventRecord> event_records;
std::vector<RankStepRecord> rank_records;
std::vector<GemmErrorRecord> gemm_error_records;
std::vector<GateUpAlignmentRecord> gate_up_records;
std::map<RunStep, std::vector<hsize_t>> operand_rows, blockmap_rows;
std::map<RunStep, hsize_t> scaling_rows;
std::map<std::pair<std::int32_t, int>, std::vector<std::pair<std::int64_t, hsize_t>>> series_rows;  // (run, slot), step order
// Per run, in step order: runs of consecutive op rows of one step (a step's ops and
// kernels are written together, so a step is usually one entry, not one per row).
struct OpRows {
    std::int64_t step;
    hsize_t first, count;
};
std::vector<std::vector<OpRows>> op_rows;
std::vector<std::vector<OpRows>> kernel_step_rows;  // the same for /kernel_steps
hsize_t indexed_kernel_steps = 0;
hsize_t indexed_steps = 0, indexed_events = 0, indexed_scaling = 0, indexed_operands = 0,
        indexed_blockmaps = 0, indexed_ops = 0, indexed_ranks = 0, indexed_gemm_errors = 0,
        indexed_gate_up = 0;

    // Indexes rows added since the last call; true when any were. Op names found on the
    // way go to meta.ops.
    bool update(const TraceFile& f, TraceMeta& meta);
    // Before the first update(): leaves out the rows of the per-step tables (steps, scaling,
    // ops, kernel sums, ranks) that lie before the newest steps from `from` on, found from
    // each table's end back (an overview's tail); the sparse ones (operands and GEMM errors
    // at capture steps, block maps, events) are indexed whole. A row before them at a step >= from was abandoned by a rewind, so what stands
    // of the steps from `from` on is all indexed.
    void start_at(const TraceFile& f, std::int64_t from);
};

// A row of /ops: its run, op and parent must be in /meta (f.fail names the row otherwise).
void check_op_row(const TraceFile& f, const TraceMeta& meta, const OpRecord& r, hsize_t row);

}  // namespace fp8scope::trace
