// The step table of a large trace without holding it: one pass over /steps, a block of
// rows at a time, feeds each run's StepDecimator (what a plot of the whole run needs) and
// notes per block and run its smallest and largest step. A range of steps is then read
// back at full detail from only the blocks that hold it (HDF5 hyperslabs), and which of
// its records stand after rewinds is decided from the blocks' smallest steps, exactly as
// a reader of every row would.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "reader_file.h"
#include "step_decimator.h"

namespace fp8scope::trace {

// `r` (row `row` of /steps) checked against /meta, in this format's units: the one check
// of a step row, whether it is indexed or scanned.
void check_step_record(const TraceFile& f, const TraceMeta& meta, StepRecord& r, hsize_t row);

// Of `rows`, one run's records in file order, those that no later record of the run goes
// back before or to (a rewind), step ascending. `later_min`: the smallest step of the
// run's records after the last of `rows` (INT64_MAX: none).
template <class R>
std::vector<R> standing_records(std::vector<R> rows, std::int64_t later_min = INT64_MAX) {
    std::vector<R> kept;
    for (std::size_t i = rows.size(); i-- > 0;) {
        const std::int64_t step = rows[i].step;
        if (step < later_min) kept.push_back(std::move(rows[i]));
        later_min = std::min(later_min, step);
    }
    std::reverse(kept.begin(), kept.end());
    return kept;
}

// The newest step of the runs: of each run's last record in /steps (where it is now), the
// largest; read from the table's end. INT64_MIN when the table is empty.
std::int64_t newest_step(const TraceFile& f, const TraceMeta& meta);

struct StepOverview {
    static constexpr hsize_t kBlockRows = 4096;

    struct Block {
        hsize_t first = 0, count = 0;
        std::vector<std::int64_t> min, max;  // per run (rank); INT64_MAX / INT64_MIN: none in the block
    };
    std::vector<StepDecimator> runs;
    std::vector<Block> blocks;
    hsize_t scanned = 0;  // rows of /steps seen

    // Scans the rows of /steps added since the last call (const readers scan on first use).
    void scan(const TraceFile& f, const TraceMeta& meta, std::size_t buckets = StepDecimator::kDefaultBuckets);
    // The records of `run` in [from, to] that stand, step ascending, read from the blocks
    // that hold them.
    std::vector<StepRecord> read(const TraceFile& f, const TraceMeta& meta, int run, std::int64_t from,
                                 std::int64_t to) const;
};

// The same for the per-step amax and scale (/scaling): one pass over its rows feeds each
// run's SlotDecimator (one series per operand slot) and notes per block of rows and run
// its smallest and largest step, from which a range is read back at full detail.
struct ScalingOverview {
    static constexpr hsize_t kBlockRows = 4096;
    // Fewer buckets than the step records': a run has a series per operand slot.
    static constexpr std::size_t kBuckets = 1024;

    std::vector<SlotDecimator> runs;
    std::vector<StepOverview::Block> blocks;
    hsize_t scanned = 0;  // rows of /scaling/index seen

    void scan(const TraceFile& f, const TraceMeta& meta, std::size_t buckets = kBuckets);
    std::vector<ScalingRecord> read(const TraceFile& f, const TraceMeta& meta, int run, std::int64_t from,
                                    std::int64_t to) const;
};

// A run's per-step kernel sums (/kernel_steps, since format 6) the same way: each step's
// sums (a row per kernel, op and record kind, written together) are one record, decimated
// by the step's device time (the sum of its rows' total_ns), every row of a kept step kept.
// A step's rows that name a kernel its earlier rows named are its recording again (after a
// rewind), as the series store reads them.
struct KernelStepSums {
    std::int64_t step = 0;
    double device_ns = 0;
    std::vector<KernelStepRecord> rows;
    // Whether `r` (of this step) belongs to these sums, not to a recording of the step again.
    bool continues(const KernelStepRecord& r) const;
    void add(const KernelStepRecord& r);
};
struct KernelSumFigures {
    using Record = KernelStepSums;
    static constexpr std::size_t kCount = 1;
    static constexpr bool kKeepFirst = true;
    static std::int64_t step(const KernelStepSums& s) { return s.step; }
    static double figure(const KernelStepSums& s, std::size_t) { return s.device_ns; }
    static bool bad(const KernelStepSums&) { return false; }
};
using KernelSumDecimator = MinMaxDecimator<KernelSumFigures>;

struct KernelStepOverview {
    static constexpr hsize_t kBlockRows = 16384;

    std::vector<KernelSumDecimator> runs;
    std::vector<KernelStepSums> open;  // per run: the step being summed, not yet decimated
    // Per run, ascending: the steps whose sums say their individual records are in /ops
    // (KernelStepRecord::detailed), those a rewind abandoned left out; and the step of
    // the run's last sum seen (where a step going back is a rewind).
    std::vector<std::vector<std::int64_t>> detailed;
    std::vector<std::int64_t> last_step;
    std::vector<StepOverview::Block> blocks;
    hsize_t scanned = 0;  // rows of /kernel_steps seen

    void scan(const TraceFile& f, const TraceMeta& meta, std::size_t buckets = StepDecimator::kDefaultBuckets);
    // The rows of `run`'s kept steps, step ascending.
    std::vector<KernelStepRecord> decimated(int run) const;
    // The rows of `run` in [from, to] that stand, step ascending, read from the blocks that
    // hold them.
    std::vector<KernelStepRecord> read(const TraceFile& f, const TraceMeta& meta, int run, std::int64_t from,
                                       std::int64_t to) const;
};

// A run's individual op and kernel records (/ops) the same way, for the steps before an
// overview's newest: the blocks of rows and their smallest and largest step per run, from
// one pass over /ops made when a range is first asked for.
struct OpOverview {
    static constexpr hsize_t kBlockRows = 16384;

    std::vector<StepOverview::Block> blocks;
    hsize_t scanned = 0;  // rows of /ops seen

    void scan(const TraceFile& f, const TraceMeta& meta);
    // The records of `run` in [from, to] that stand (a step's records, written together,
    // unless a later record of the run lies at that step or before), step ascending, file
    // order within a step.
    std::vector<OpRecord> read(const TraceFile& f, const TraceMeta& meta, int run, std::int64_t from, std::int64_t to) const;
};
// Rows [first, first + count) of /ops, each checked against /meta (run, op and parent ids).
std::vector<OpRecord> read_op_rows(const TraceFile& f, const TraceMeta& meta, hsize_t first, hsize_t count);

// The same for a data-parallel job's per-rank step times (/ranks): each rank's records
// decimated (RankDecimator), ranges read back from the blocks that hold them.
struct RankOverview {
    static constexpr hsize_t kBlockRows = 4096;

    std::vector<RankDecimator> ranks;  // by rank
    std::vector<StepOverview::Block> blocks;  // min and max per rank
    hsize_t scanned = 0;

    void scan(const TraceFile& f, const TraceMeta& meta, std::size_t buckets = StepDecimator::kDefaultBuckets);
    std::vector<RankStepRecord> read(const TraceFile& f, const TraceMeta& meta, int rank, std::int64_t from,
                                     std::int64_t to) const;
};
// Rows [first, first + count) of /ranks, each checked against /meta's world_size.
std::vector<RankStepRecord> read_rank_rows(const TraceFile& f, const TraceMeta& meta, hsize_t first, hsize_t count);

// Rows [first, first + count) of /kernel_steps, each checked against /meta (one verdict
// for the index and the overview).
std::vector<KernelStepRecord> read_kernel_step_rows(const TraceFile& f, const TraceMeta& meta, hsize_t first, hsize_t count);

// Rows [first, first + count) of /scaling as read: the index rows (run, step; checked
// against /meta) and the amax and scale, row-major (count, cols).
struct ScalingRows {
    std::vector<ScalingRecord> index;  // amax and scale empty
    std::vector<float> amax, scale;
    std::size_t cols = 0;
    std::size_t size() const { return index.size(); }
    const ScalingRecord& operator[](std::size_t i) const { return index[i]; }
    ScalingRecord record(std::size_t i, std::size_t slots) const;  // row i whole
};
ScalingRows read_scaling_rows(const TraceFile& f, const TraceMeta& meta, hsize_t first, hsize_t count);

}  // namespace fp8scope::trace
