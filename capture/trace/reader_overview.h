// The step table of a large trace without holding it: one pass over /steps, a block of
// rows at a time, feeds each run's StepDecimator (what a plot of the whole run needs) and
// notes per block and run its smallest and largest step. A range of steps is then read
// back at full detail from only the blocks that hold it (HDF5 hyperslabs), and which of
// its records stand after rewinds is decided from the blocks' smallest steps, exactly as
// a reader of every row would.
#pragma once

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
std::vector<StepRecord> standing_records(const std::vector<StepRecord>& rows, std::int64_t later_min = INT64_MAX);

// The newest step of the runs: of each run's last record in /steps (where it is now), the
// largest; read from the table's end. INT64_MIN when the table is empty.
std::int64_t newest_step(const TraceFile& f, const TraceMeta& meta);

struct StepOverview {
    static constexpr hsize_t kBlockRows = 4096;

    struct Block {
        hsize_t first = 0, count = 0;
        std::vector<std::int64_t> min, max;  // per run; INT64_MAX / INT64_MIN: none in the block
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

}  // namespace fp8scope::trace
