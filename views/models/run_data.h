// What the series store holds: a trace's records, reorganised into columns per run so the
// views read plots over 100k steps without copying or searching. Filled only by
// SeriesStore; views read it under the store's lock (SeriesStore::read).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "models/op_list.h"
#include "models/operand_summary.h"
#include "models/record_columns.h"
#include "step_decimator.h"
#include "trace_records.h"

namespace fp8scope::views {

// Per-step figures of one run, one entry per step (steps ascending): every numeric field
// of trace::StepRecord's list.
using StepColumns = RecordColumns<trace::StepRecord>;

// Amax and scale of every operand slot at every step: row-major (steps, slot_count). A
// large trace's (an overview's) steps outside the rows are decimated: each slot's points
// there (`decimated`, step ascending) are kept apart, since every slot keeps other steps.
struct ScalingColumns {
    int slot_count = 0;
    std::vector<double> step;
    std::vector<float> amax, scale;
    std::vector<std::vector<trace::SlotPoint>> decimated;  // by slot; empty unless an overview
    float amax_at(std::size_t row, int slot) const { return amax[row * slot_count + slot]; }
    float scale_at(std::size_t row, int slot) const { return scale[row * slot_count + slot]; }
    std::size_t rows() const { return step.size(); }
    // One slot's points in [first, last], the rows' and the decimated ones merged, step
    // ascending.
    std::vector<trace::SlotPoint> points(int slot, double first = -1e300, double last = 1e300) const;
};

// One rank's figures of a data-parallel job, one entry per step (steps ascending): every
// numeric field of trace::RankStepRecord's list. Floats: milliseconds need no more, and a
// long run of many ranks stays small.
struct RankColumns : RecordColumns<trace::RankStepRecord, float> {
    // The error compressed sums added is measured on a sample every few steps, so the
    // measured steps are also kept alone (ascending), for the plot, not as a column of NaN.
    std::vector<double> error_step;
    std::vector<float> grad_error;
};

struct OperandRef {
    int linear = 0;
    Gemm gemm = Gemm::Fprop;
    Operand operand = Operand::X;
    int slot() const { return trace::operand_slot(linear, gemm, operand); }
    bool operator==(const OperandRef&) const = default;
};
inline bool slot_order(const OperandRef& a, const OperandRef& b) { return a.slot() < b.slot(); }

struct RunData {
    trace::RunInfo info;  // as the run started; TraceMeta::runs names it after its recipe switches
    StepColumns steps;
    ScalingColumns scaling;
    // Operand summaries per capture step, indexed by operand slot (a slot with no record
    // is absent()).
    std::vector<std::int64_t> capture_steps;
    std::vector<std::vector<OperandSummary>> operands;
    std::vector<trace::BlockMapRecord> blockmaps;
    std::vector<trace::GemmErrorRecord> gemm_errors;  // step ascending (models/gemm_error_model.h)
    // A SwiGLU model's gate/up alignment per MLP at capture steps, step ascending.
    std::vector<trace::GateUpAlignmentRecord> gate_up;
    OpList ops;  // step ascending
    // The per-step sums of the run's device records (every step of a GPU run, also where
    // the individual records in `ops` were not kept), step ascending.
    std::vector<trace::KernelStepRecord> kernel_steps;
    // A large trace's (an overview's) steps outside those read whole: the sums of the steps
    // a decimation by device time kept (min/max per bucket), step ascending. Apart from
    // kernel_steps, so that statistics over the run never mix them in.
    std::vector<trace::KernelStepRecord> kernel_steps_decimated;
    // A large trace's steps whose individual kernel records the file holds (ascending; read
    // from its kernel sums), also those whose records are not in `ops`; unset until known,
    // and for a trace read whole (`ops` holds them all).
    std::optional<std::vector<std::int64_t>> kernel_record_steps;

    // Index of the newest capture step <= step; -1 when none.
    std::ptrdiff_t capture_index_at(std::int64_t step) const;
    const OperandSummary* operand(std::ptrdiff_t capture_index, const OperandRef& ref) const;
    // Newest summary of the operand at or before `step`.
    const OperandSummary* operand_at(std::int64_t step, const OperandRef& ref) const;
    // Newest block-map step <= step that holds maps of `ref`; -1 when none.
    std::int64_t blockmap_step_at(std::int64_t step, const OperandRef& ref) const;
    std::vector<const trace::BlockMapRecord*> blockmaps_of(std::int64_t step, const OperandRef& ref) const;
    // Ops of one step: [first, last) into ops.
    std::pair<std::size_t, std::size_t> ops_of_step(std::int64_t step) const;
    // Kernel sums of one step: [first, last) into kernel_steps.
    std::pair<std::size_t, std::size_t> kernel_steps_of(std::int64_t step) const;
    // Every kernel sum of one step: those read whole, else those of a step a large trace's
    // decimation kept; empty when the store holds neither (the step's were decimated away).
    std::span<const trace::KernelStepRecord> step_sums(std::int64_t step) const;
    // Row of the newest step <= step in `steps`; -1 when none.
    std::ptrdiff_t step_row_at(std::int64_t step) const;
};

// Where a run of a job opened from its rank traces (rank_folder.h) comes from.
struct RankRun {
    int rank = 0;
    int run = 0;  // in that rank's trace
};

struct TraceData {
    trace::TraceMeta meta;
    // A job opened from its rank traces: each run's rank and run there; empty otherwise.
    std::vector<RankRun> rank_runs;
    std::vector<RunData> runs;
    std::vector<trace::EventRecord> events;
    std::vector<RankColumns> ranks;  // by rank; meta.world_size of them, empty for one process
    // An overview's (detail_from) rank records outside those read whole, decimated per rank
    // (step ascending); apart from `ranks`, whose medians they would bias.
    std::vector<std::vector<trace::RankStepRecord>> ranks_decimated;
    std::int64_t first_step = -1, last_step = -1;  // over all runs; -1 when empty
    // A large trace opened as an overview (open_trace.h): the step from which on its per-step
    // records are all read; before it, only what a zoom read (INT64_MIN: not an overview).
    std::int64_t detail_from = INT64_MIN;
    // An overview's windows of steps before detail_from whose op and kernel records were read
    // for the Kernels view ([first, last], oldest request first), at most kOpWindows.
    static constexpr std::size_t kOpWindows = 4;
    std::vector<std::pair<std::int64_t, std::int64_t>> op_windows;
    // The step whose amax and scale were last read whole for the cursor (TraceBatch::
    // scaling_at); INT64_MIN: none.
    std::int64_t scaling_at = INT64_MIN;
    // The same for the kernel sums of every run (TraceBatch::kernel_sums_at).
    std::int64_t kernel_sums_at = INT64_MIN;
    bool empty() const { return last_step < 0; }
    int slot_count() const { return static_cast<int>(meta.linears.size()) * trace::kOperandsPerLinear; }
};

// The runs that are `run` on every rank of a job (rank_runs), each with its rank, rank
// ascending; {run, -1} alone for a trace that is not a job's.
std::vector<std::pair<int, int>> job_runs(const TraceData& d, int run);

}  // namespace fp8scope::views
