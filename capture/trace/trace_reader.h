// Reading a trace: the GUI's only way to a recorded run. Opens finished traces and
// traces still being written (HDF5 SWMR), follows a growing file with refresh(), and
// gives random access by run, step, linear, GEMM, operand and recipe. Corrupt, truncated
// or foreign files are rejected with a TraceError that names the file and the problem;
// a reader never crashes on a bad file.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "step_decimator.h"
#include "trace_records.h"

namespace fp8scope::trace {

// Scalar figures of one operand at one capture step, for plots over steps.
struct OperandPoint {
    std::int64_t step = 0;
    std::int32_t quantizer_in_use = -1;
    double amax = 0, scale = kNone, kurtosis = 0, dynamic_range = 0;
    std::vector<ErrorStats> errors;  // one per recipe (recipe names empty: use meta)
};

// How a trace too large to hold opens: as an overview (TraceReader::overview()).
struct LargeTraceOptions {
    // A trace with at least this many step records (all runs together) opens as an
    // overview; 0: every trace opens whole.
    std::uint64_t min_step_rows = 0;
    // An overview indexes the records of this many steps before the newest, whole.
    std::int64_t tail_steps = 2000;
    // Buckets of each run's decimated steps (step_decimator.h).
    std::size_t buckets = 4096;  // StepDecimator::kDefaultBuckets
};

class TraceReader {
public:
    // Throws TraceError: missing file, not HDF5, not an fp8scope trace, newer format
    // version, missing or malformed objects.
    explicit TraceReader(const std::string& path, const LargeTraceOptions& large = {});
    ~TraceReader();
    TraceReader(TraceReader&&) noexcept;
    TraceReader& operator=(TraceReader&&) noexcept;

    const std::string& path() const;
    const TraceMeta& meta() const;
    // Re-reads the extent of every dataset of a growing file; true when rows were added.
    bool refresh();

    // A trace opened as an overview holds in memory only what its views need first, so that
    // one of any size opens in a second or two: of the per-step tables (steps, scaling, ops,
    // kernel sums, ranks) only the rows of the newest steps (from detail_from() on) are
    // indexed, and every query below but step_overview and steps(run, from, to) (and their
    // scaling and kernel-sum twins) sees those alone; the sparse records (operands and GEMM
    // errors at capture steps, block maps, events) are indexed whole. The first call of
    // either of those two reads every step record once, for the decimated series and a
    // map of where each run's steps lie in the file. Records a growing file adds are
    // indexed as usual.
    bool overview() const;
    // The first step whose records are all indexed: INT64_MIN unless an overview.
    std::int64_t detail_from() const;
    // The step records of `run` that stand, decimated for a plot of the whole run (min/max
    // per bucket: spikes kept, step_decimator.h), step ascending.
    std::vector<StepRecord> step_overview(int run) const;
    // The step records of `run` in [from, to] that stand, step ascending, at full detail;
    // in an overview read from the rows that hold them (what a zoomed-in plot needs).
    std::vector<StepRecord> steps(int run, std::int64_t from, std::int64_t to) const;
    // The same two for the per-step amax and scale: per operand slot (operand_slot), the
    // points of `run` decimated (SlotDecimator, 1,024 buckets), step ascending; and the
    // scaling records of `run` in [from, to] that stand, at full detail. The first call of
    // either in an overview reads /scaling once.
    std::vector<std::vector<SlotPoint>> scaling_overview(int run) const;
    std::vector<ScalingRecord> scaling_detail(int run, std::int64_t from, std::int64_t to) const;
    // The scaling records of `run` in [from, to] that stand, decimated as scaling_overview
    // does the whole run's (a zoom too wide to hold at full detail).
    std::vector<std::vector<SlotPoint>> scaling_overview(int run, std::int64_t from, std::int64_t to) const;
    // And for the per-step kernel sums: every sum of `run`'s steps kept by a decimation of
    // its steps by device time (the sum of a step's total_ns; min/max per bucket), step
    // ascending; and `run`'s sums of the steps in [from, to] that stand, at full detail.
    std::vector<KernelStepRecord> kernel_step_overview(int run) const;
    // And for a data-parallel job's per-rank step times: every rank's records decimated
    // (RankDecimator: compute, comm and step time), and the records of the steps in
    // [from, to] that stand, at full detail; both rank ascending, then step.
    std::vector<RankStepRecord> rank_overview() const;
    std::vector<RankStepRecord> rank_steps_detail(std::int64_t from, std::int64_t to) const;
    std::vector<KernelStepRecord> kernel_steps_detail(int run, std::int64_t from, std::int64_t to) const;
    // The op and kernel records (/ops) of `run` in [from, to], step ascending; in an overview,
    // for a range that begins before the newest steps, those that stand, read from the
    // blocks of rows that hold them (one pass over /ops, on the first call that needs it):
    // keep the range short.
    std::vector<OpRecord> ops_detail(int run, std::int64_t from, std::int64_t to) const;
    // The steps of `run` whose individual device records are in /ops (their kernel sums say
    // so: KernelStepRecord::detailed), ascending; in an overview from the pass over
    // /kernel_steps that kernel_step_overview makes. Of a file before format 6, which kept
    // every record: the steps whose /ops rows hold device records (of the indexed steps).
    std::vector<std::int64_t> kernel_record_steps(int run) const;

    // Every indexed step record of `run`, in file order.
    std::vector<StepRecord> steps(int run) const;
    std::int64_t last_step(int run) const;  // -1 when none
    std::vector<EventRecord> events() const;
    // Every rank's record of every step of a data-parallel run, in file order (a step
    // recorded again after a rewind comes again, later); none for a single process or
    // a file older than format 3.
    std::vector<RankStepRecord> rank_steps() const;
    // The output error of every GEMM of `run` at its capture steps (one row per linear and
    // GEMM), in file order; none in a file from before they were recorded.
    std::vector<GemmErrorRecord> gemm_errors(int run) const;
    // How far the gate and up projections of every SwiGLU MLP of `run` aligned, at its capture
    // steps (one row per MLP), in file order; none for other models and in files before format 7.
    std::vector<GateUpAlignmentRecord> gate_up_alignment(int run) const;
    // Per-step amax/scale of every operand slot, steps in [from, to].
    std::vector<ScalingRecord> scaling(int run, std::int64_t from, std::int64_t to) const;
    // The steps in [from, to] that have scaling, op or kernel-sum rows, ascending, each once: a
    // reader that walks these does work in proportion to the rows, never to the range
    // (one step far from the others, a flipped sign bit, is one step, not 2^63).
    std::vector<std::int64_t> row_steps(int run, std::int64_t from, std::int64_t to) const;

    std::vector<std::int64_t> capture_steps(int run) const;
    std::optional<OperandRecord> operand(const OperandKey& key) const;
    std::vector<OperandRecord> operands(int run, std::int64_t step) const;
    std::vector<OperandPoint> operand_series(int run, int linear, Gemm gemm, Operand operand) const;
    // operand_series of every operand slot of `run` (indexed by operand_slot), read in file
    // order: the same points, each chunk of the compressed errors inflated once.
    std::vector<std::vector<OperandPoint>> run_operand_series(int run) const;

    std::vector<std::int64_t> blockmap_steps(int run) const;
    std::vector<BlockMapRecord> blockmaps(const OperandKey& key) const;

    std::vector<OpRecord> ops(int run, std::int64_t from, std::int64_t to) const;
    // The per-step sums of `run`'s device records, steps in [from, to], in file order per
    // step. A file from before they were written (format 5 and older, which kept every
    // record) gets them made from its /ops rows (sum_kernel_steps, every step detailed).
    std::vector<KernelStepRecord> kernel_steps(int run, std::int64_t from, std::int64_t to) const;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace fp8scope::trace
