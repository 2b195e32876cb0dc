// One pass over a large trace's steps, and ranges read back from it (reader_overview.h).
#include "reader_overview.h"

#include <algorithm>
#include <optional>
#include <string>
#include <utility>

#include "reader_index.h"

namespace fp8scope::trace {
namespace s = schema;

namespace {

// The series a record belongs to: its run, or for a rank's step times its rank.
template <class R>
int series_of(const R& r) { return r.run; }
int series_of(const RankStepRecord& r) { return r.rank; }

// The records of `run` (a series: series_of) in [from, to] that stand, step ascending, from the blocks that hold
// them (`read_block(block)`: a block's records, file order). From the last block back: the
// smallest step after each block decides what stands.
template <class R, class ReadBlock>
std::vector<R> read_range(const std::vector<StepOverview::Block>& blocks, std::size_t series, int run,
                          std::int64_t from, std::int64_t to, ReadBlock read_block) {
    std::vector<R> out;
    if (run < 0 || run >= static_cast<int>(series) || from > to) return out;
    std::int64_t later_min = INT64_MAX;
    std::vector<std::vector<R>> parts;  // newest block first
    for (std::size_t k = blocks.size(); k-- > 0;) {
        const StepOverview::Block& b = blocks[k];
        if (b.min[run] <= to && b.max[run] >= from && b.min[run] < later_min) {
            std::vector<R> mine;
            for (R& r : read_block(b))
                if (series_of(r) == run) mine.push_back(std::move(r));
            std::vector<R> kept = standing_records(std::move(mine), later_min);
            std::erase_if(kept, [&](const R& r) { return r.step < from || r.step > to; });
            parts.push_back(std::move(kept));
        }
        later_min = std::min(later_min, b.min[run]);
    }
    for (std::size_t k = parts.size(); k-- > 0;)
        out.insert(out.end(), std::make_move_iterator(parts[k].begin()), std::make_move_iterator(parts[k].end()));
    return out;
}

// One pass over the rows of a table added since `scanned` (`rows` now), read `block_rows`
// at a time by read(first, count): notes each block's smallest and largest step per run
// and hands each row not seen before to take(rows, i) (the block's rows and its index). The last block fills up as the file
// grows: it is read again whole, but its rows seen before are not taken again.
template <class Read, class Take>
void scan_blocks(std::vector<StepOverview::Block>& blocks, hsize_t& scanned, hsize_t rows, hsize_t block_rows,
                 std::size_t n_runs, Read read, Take take) {
    if (rows <= scanned) return;
    if (!blocks.empty() && blocks.back().count < block_rows) blocks.pop_back();
    hsize_t first = blocks.empty() ? 0 : blocks.back().first + blocks.back().count;
    while (first < rows) {
        const hsize_t count = std::min<hsize_t>(block_rows, rows - first);
        auto records = read(first, count);
        StepOverview::Block b{first, count, std::vector<std::int64_t>(n_runs, INT64_MAX), std::vector<std::int64_t>(n_runs, INT64_MIN)};
        for (hsize_t i = 0; i < count; ++i) {
            const auto& r = records[i];
            const int k = series_of(r);
            b.min[k] = std::min(b.min[k], r.step);
            b.max[k] = std::max(b.max[k], r.step);
            if (first + i >= scanned) take(records, i);
        }
        blocks.push_back(std::move(b));
        first += count;
    }
    scanned = rows;
}

}  // namespace

void check_step_record(const TraceFile& f, const TraceMeta& meta, StepRecord& r, hsize_t row) {
    if (r.run < 0 || r.run >= static_cast<int>(meta.runs.size()))
        throw f.fail(std::string(s::kSteps) + " row " + std::to_string(row) + ": run " + std::to_string(r.run) +
                     " is not in /meta/runs");
    if (r.recipe < -1 || r.recipe >= static_cast<int>(meta.training_recipes.size()))
        throw f.fail(std::string(s::kSteps) + " row " + std::to_string(row) + ": recipe " + std::to_string(r.recipe) +
                     " is not in the recipe table");
    if (f.format_version < 4) r.step_ms *= 1e3;  // step_time_s, in seconds
}

std::int64_t newest_step(const TraceFile& f, const TraceMeta& meta) {
    std::vector<char> seen(meta.runs.size(), 0);
    std::size_t runs_seen = 0;
    std::int64_t newest = INT64_MIN;
    // Back from the end until every run's last record is seen (a run that stopped long ago
    // may have none near the end: a few blocks bound the search).
    for (hsize_t end = f.steps.rows, blocks = 0; end > 0 && runs_seen < seen.size() && blocks < 16; ++blocks) {
        const hsize_t n = std::min<hsize_t>(end, StepOverview::kBlockRows);
        auto rows = f.read_records<s::StepTable>(f.steps, end - n, n);
        for (hsize_t i = n; i-- > 0;) {
            StepRecord& r = rows[i];
            check_step_record(f, meta, r, end - n + i);
            if (seen[r.run]) continue;
            seen[r.run] = 1;
            ++runs_seen;
            newest = std::max(newest, r.step);
        }
        end -= n;
    }
    return newest;
}

void StepOverview::scan(const TraceFile& f, const TraceMeta& meta, std::size_t buckets) {
    const std::size_t n_runs = meta.runs.size();
    if (runs.size() < n_runs) runs.resize(n_runs, StepDecimator(buckets));
    const auto read = [&](hsize_t first, hsize_t count) {
        auto rows = f.read_records<s::StepTable>(f.steps, first, count);
        for (hsize_t i = 0; i < count; ++i) check_step_record(f, meta, rows[i], first + i);
        return rows;
    };
    scan_blocks(blocks, scanned, f.steps.rows, kBlockRows, n_runs, read,
                [&](const std::vector<StepRecord>& rows, hsize_t i) { runs[rows[i].run].add(rows[i]); });
}

std::vector<StepRecord> StepOverview::read(const TraceFile& f, const TraceMeta& meta, int run, std::int64_t from,
                                           std::int64_t to) const {
    return read_range<StepRecord>(blocks, meta.runs.size(), run, from, to, [&](const Block& b) {
        auto rows = f.read_records<s::StepTable>(f.steps, b.first, b.count);
        for (hsize_t i = 0; i < b.count; ++i) check_step_record(f, meta, rows[i], b.first + i);
        return rows;
    });
}

ScalingRecord ScalingRows::record(std::size_t i, std::size_t slots) const {
    ScalingRecord r = index[i];
    r.amax.assign(amax.begin() + static_cast<std::ptrdiff_t>(i * cols), amax.begin() + static_cast<std::ptrdiff_t>(i * cols + slots));
    r.scale.assign(scale.begin() + static_cast<std::ptrdiff_t>(i * cols), scale.begin() + static_cast<std::ptrdiff_t>(i * cols + slots));
    return r;
}

ScalingRows read_scaling_rows(const TraceFile& f, const TraceMeta& meta, hsize_t first, hsize_t count) {
    if (f.scaling_amax.rows < first + count || f.scaling_scale.rows < first + count)
        throw f.fail("/scaling/amax or /scaling/scale has fewer rows than /scaling/index");
    ScalingRows rows;
    rows.index = f.read_records<s::ScalingIndexTable>(f.scaling_index, first, count);
    rows.cols = f.scaling_amax.cols;
    rows.amax.resize(count * rows.cols);
    rows.scale.resize(count * rows.cols);
    f.read_rows(f.scaling_amax, first, count, rows.amax.data());
    f.read_rows(f.scaling_scale, first, count, rows.scale.data());
    for (hsize_t i = 0; i < count; ++i)
        if (rows.index[i].run < 0 || rows.index[i].run >= static_cast<int>(meta.runs.size()))
            throw f.fail(std::string(s::kScalingIndex) + " row " + std::to_string(first + i) + ": run " +
                         std::to_string(rows.index[i].run) + " is not in /meta/runs");
    return rows;
}

void ScalingOverview::scan(const TraceFile& f, const TraceMeta& meta, std::size_t buckets) {
    const std::size_t n_runs = meta.runs.size();
    if (runs.size() < n_runs) runs.resize(n_runs, SlotDecimator(buckets, f.slots));
    std::vector<SlotPoint> points(f.slots);
    scan_blocks(
        blocks, scanned, f.scaling_index.rows, kBlockRows, n_runs,
        [&](hsize_t first, hsize_t count) { return read_scaling_rows(f, meta, first, count); },
        [&](const ScalingRows& rows, hsize_t i) {
            const float* amax = rows.amax.data() + i * rows.cols;
            const float* scale = rows.scale.data() + i * rows.cols;
            for (std::size_t k = 0; k < points.size(); ++k) points[k] = {rows[i].step, amax[k], scale[k]};
            runs[rows[i].run].add(points);
        });
}

std::vector<ScalingRecord> ScalingOverview::read(const TraceFile& f, const TraceMeta& meta, int run, std::int64_t from,
                                                 std::int64_t to) const {
    return read_range<ScalingRecord>(blocks, meta.runs.size(), run, from, to,
                                     [&](const StepOverview::Block& b) {
                                         const ScalingRows rows = read_scaling_rows(f, meta, b.first, b.count);
                                         std::vector<ScalingRecord> out;
                                         for (std::size_t i = 0; i < rows.size(); ++i)
                                             if (rows[i].run == run) out.push_back(rows.record(i, f.slots));
                                         return out;
                                     });
}

std::vector<KernelStepRecord> read_kernel_step_rows(const TraceFile& f, const TraceMeta& meta, hsize_t first, hsize_t count) {
    auto rows = f.read_records<s::KernelStepTable>(f.kernel_steps, first, count);
    const auto ops = static_cast<std::int64_t>(meta.ops.size());
    for (hsize_t i = 0; i < count; ++i) {
        const KernelStepRecord& k = rows[i];
        const std::string at = std::string(s::kKernelSteps) + " row " + std::to_string(first + i);
        if (k.run < 0 || k.run >= static_cast<int>(meta.runs.size()))
            throw f.fail(at + ": run " + std::to_string(k.run) + " is not in /meta/runs");
        const int kind = static_cast<int>(k.kind);
        if (k.op < 0 || k.op >= ops || k.parent < -1 || k.parent >= ops || kind < 0 ||
            kind > static_cast<int>(OpKind::Memset) || k.count < 1 || k.min_ns > k.max_ns)
            throw f.fail(at + ": op " + std::to_string(k.op) + ", parent " + std::to_string(k.parent) + ", kind " +
                         std::to_string(kind) + ", count " + std::to_string(k.count) + ", min/max ns " +
                         std::to_string(k.min_ns) + "/" + std::to_string(k.max_ns) + " are not a sum of calls");
    }
    return rows;
}

bool KernelStepSums::continues(const KernelStepRecord& r) const {
    return r.step == step && std::none_of(rows.begin(), rows.end(), [&](const KernelStepRecord& o) {
               return o.op == r.op && o.parent == r.parent && o.kind == r.kind;
           });
}

void KernelStepSums::add(const KernelStepRecord& r) {
    if (rows.empty()) step = r.step;
    device_ns += static_cast<double>(r.total_ns);
    rows.push_back(r);
}

void KernelStepOverview::scan(const TraceFile& f, const TraceMeta& meta, std::size_t buckets) {
    const std::size_t n_runs = meta.runs.size();
    if (runs.size() < n_runs) runs.resize(n_runs, KernelSumDecimator(buckets));
    if (open.size() < n_runs) open.resize(n_runs);
    if (detailed.size() < n_runs) detailed.resize(n_runs);
    if (last_step.size() < n_runs) last_step.resize(n_runs, INT64_MIN);
    if (f.format_version < 6) return;
    scan_blocks(
        blocks, scanned, f.kernel_steps.rows, kBlockRows, n_runs,
        [&](hsize_t first, hsize_t count) { return read_kernel_step_rows(f, meta, first, count); },
        [&](const std::vector<KernelStepRecord>& rows, hsize_t i) {
            const KernelStepRecord& r = rows[i];
            KernelStepSums& sums = open[r.run];
            if (!sums.rows.empty() && !sums.continues(r)) runs[r.run].add(std::exchange(sums, {}));
            sums.add(r);
            std::vector<std::int64_t>& kept = detailed[r.run];
            if (r.step < last_step[r.run])  // a rewind: the steps from here on are recorded again
                kept.erase(std::lower_bound(kept.begin(), kept.end(), r.step), kept.end());
            last_step[r.run] = r.step;
            if (r.detailed && (kept.empty() || kept.back() != r.step)) kept.push_back(r.step);
        });
}

std::vector<KernelStepRecord> KernelStepOverview::decimated(int run) const {
    std::vector<KernelStepRecord> out;
    if (run < 0 || run >= static_cast<int>(runs.size())) return out;
    KernelSumDecimator d = runs[run];
    if (!open[run].rows.empty()) d.add(open[run]);
    for (const KernelStepSums& s : d.rows()) out.insert(out.end(), s.rows.begin(), s.rows.end());
    return out;
}

std::vector<KernelStepRecord> KernelStepOverview::read(const TraceFile& f, const TraceMeta& meta, int run, std::int64_t from,
                                                       std::int64_t to) const {
    std::vector<KernelStepRecord> out;
    if (run < 0 || run >= static_cast<int>(meta.runs.size()) || from > to || f.format_version < 6) return out;
    // From the last block back, as read_range, but a step's sums stand or fall together: the
    // oldest step seen (`open`, its rows may go on in the block before) is carried across.
    std::int64_t later_min = INT64_MAX;  // the smallest step of the run's later sums
    KernelStepSums open;                 // rows of the oldest step seen, newest first
    bool open_stands = false;
    const auto close = [&] {
        if (!open.rows.empty()) later_min = std::min(later_min, open.step);
        open = {};
    };
    std::vector<std::vector<KernelStepRecord>> parts;  // newest block first
    for (std::size_t k = blocks.size(); k-- > 0;) {
        const StepOverview::Block& b = blocks[k];
        if (b.min[run] == INT64_MAX) continue;  // none of the run's rows
        if (!(b.min[run] <= to && b.max[run] >= from && b.min[run] <= later_min)) {
            close();
            later_min = std::min(later_min, b.min[run]);
            continue;
        }
        const auto rows = read_kernel_step_rows(f, meta, b.first, b.count);
        std::vector<KernelStepRecord> kept;
        for (std::size_t i = rows.size(); i-- > 0;) {
            const KernelStepRecord& r = rows[i];
            if (r.run != run) continue;
            if (open.rows.empty() || !open.continues(r)) {
                close();
                open_stands = r.step < later_min;
            }
            open.add(r);
            if (open_stands && r.step >= from && r.step <= to) kept.push_back(r);
        }
        std::reverse(kept.begin(), kept.end());
        parts.push_back(std::move(kept));
    }
    for (std::size_t k = parts.size(); k-- > 0;) out.insert(out.end(), parts[k].begin(), parts[k].end());
    return out;
}

std::vector<OpRecord> read_op_rows(const TraceFile& f, const TraceMeta& meta, hsize_t first, hsize_t count) {
    auto rows = f.read_records<s::OpTable>(f.ops, first, count);
    for (hsize_t i = 0; i < count; ++i) check_op_row(f, meta, rows[i], first + i);
    return rows;
}

void OpOverview::scan(const TraceFile& f, const TraceMeta& meta) {
    scan_blocks(
        blocks, scanned, f.ops.rows, kBlockRows, meta.runs.size(),
        [&](hsize_t first, hsize_t count) { return read_op_rows(f, meta, first, count); },
        [](const std::vector<OpRecord>&, hsize_t) {});
}

std::vector<OpRecord> OpOverview::read(const TraceFile& f, const TraceMeta& meta, int run, std::int64_t from,
                                       std::int64_t to) const {
    std::vector<OpRecord> out;
    if (run < 0 || run >= static_cast<int>(meta.runs.size()) || from > to) return out;
    // From the last block back, as read_range, but a step has many records, written
    // together: a step's records (a group of the run's rows in a row) stand unless a later
    // record of the run lies at that step or before (a rewind recorded it again, or went
    // back past it). The oldest group seen may go on in the block before.
    std::int64_t later_min = INT64_MAX;  // the smallest step of the run's later groups
    std::optional<std::int64_t> group;   // the step of the oldest group seen
    bool group_stands = false;
    const auto close = [&] {
        if (group) later_min = std::min(later_min, *group);
        group.reset();
    };
    std::vector<std::vector<OpRecord>> parts;  // newest block first
    for (std::size_t k = blocks.size(); k-- > 0;) {
        const StepOverview::Block& b = blocks[k];
        if (b.min[run] == INT64_MAX) continue;  // none of the run's rows
        if (!(b.min[run] <= to && b.max[run] >= from && b.min[run] <= std::min(later_min, group.value_or(INT64_MAX)))) {
            close();
            later_min = std::min(later_min, b.min[run]);
            continue;
        }
        std::vector<OpRecord> kept;
        auto rows = read_op_rows(f, meta, b.first, b.count);
        for (std::size_t i = rows.size(); i-- > 0;) {
            const OpRecord& r = rows[i];
            if (r.run != run) continue;
            if (group != r.step) {
                close();
                group = r.step;
                group_stands = r.step < later_min;
            }
            if (group_stands && r.step >= from && r.step <= to) kept.push_back(r);
        }
        std::reverse(kept.begin(), kept.end());
        parts.push_back(std::move(kept));
    }
    for (std::size_t k = parts.size(); k-- > 0;) out.insert(out.end(), parts[k].begin(), parts[k].end());
    return out;
}

std::vector<RankStepRecord> read_rank_rows(const TraceFile& f, const TraceMeta& meta, hsize_t first, hsize_t count) {
    auto rows = f.read_records<s::RankTable>(f.ranks, first, count);
    for (hsize_t i = 0; i < count; ++i)
        if (rows[i].rank < 0 || rows[i].rank >= meta.world_size)
            throw f.fail(std::string(s::kRanks) + " row " + std::to_string(first + i) + ": rank " +
                         std::to_string(rows[i].rank) + " is outside world_size " + std::to_string(meta.world_size));
    return rows;
}

void RankOverview::scan(const TraceFile& f, const TraceMeta& meta, std::size_t buckets) {
    const auto world = static_cast<std::size_t>(std::max(meta.world_size, 1));
    if (ranks.size() < world) ranks.resize(world, RankDecimator(buckets));
    scan_blocks(
        blocks, scanned, f.ranks.rows, kBlockRows, world,
        [&](hsize_t first, hsize_t count) { return read_rank_rows(f, meta, first, count); },
        [&](const std::vector<RankStepRecord>& rows, hsize_t i) { ranks[rows[i].rank].add(rows[i]); });
}

std::vector<RankStepRecord> RankOverview::read(const TraceFile& f, const TraceMeta& meta, int rank, std::int64_t from,
                                               std::int64_t to) const {
    return read_range<RankStepRecord>(blocks, ranks.size(), rank, from, to,
                                      [&](const StepOverview::Block& b) { return read_rank_rows(f, meta, b.first, b.count); });
}

}  // namespace fp8scope::trace
