// One pass over a large trace's steps, and ranges read back from it (reader_overview.h).
#include "reader_overview.h"

#include <algorithm>
#include <string>

namespace fp8scope::trace {
namespace s = schema;

namespace {

// The records of `run` in [from, to] that stand, step ascending, from the blocks that hold
// them (`read_block(block)`: a block's records, file order). From the last block back: the
// smallest step after each block decides what stands.
template <class R, class ReadBlock>
std::vector<R> read_range(const std::vector<StepOverview::Block>& blocks, const TraceMeta& meta, int run,
                          std::int64_t from, std::int64_t to, ReadBlock read_block) {
    std::vector<R> out;
    if (run < 0 || run >= static_cast<int>(meta.runs.size()) || from > to) return out;
    std::int64_t later_min = INT64_MAX;
    std::vector<std::vector<R>> parts;  // newest block first
    for (std::size_t k = blocks.size(); k-- > 0;) {
        const StepOverview::Block& b = blocks[k];
        if (b.min[run] <= to && b.max[run] >= from && b.min[run] < later_min) {
            std::vector<R> mine;
            for (R& r : read_block(b))
                if (r.run == run) mine.push_back(std::move(r));
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
    if (f.steps.rows <= scanned) return;
    // The last block fills up as the file grows: it is read again whole, but the rows the
    // decimators have seen are not fed to them again.
    if (!blocks.empty() && blocks.back().count < kBlockRows) blocks.pop_back();
    hsize_t first = blocks.empty() ? 0 : blocks.back().first + blocks.back().count;
    while (first < f.steps.rows) {
        const hsize_t count = std::min<hsize_t>(kBlockRows, f.steps.rows - first);
        auto rows = f.read_records<s::StepTable>(f.steps, first, count);
        Block b{first, count, std::vector<std::int64_t>(n_runs, INT64_MAX), std::vector<std::int64_t>(n_runs, INT64_MIN)};
        for (hsize_t i = 0; i < count; ++i) {
            StepRecord& r = rows[i];
            check_step_record(f, meta, r, first + i);
            b.min[r.run] = std::min(b.min[r.run], r.step);
            b.max[r.run] = std::max(b.max[r.run], r.step);
            if (first + i >= scanned) runs[r.run].add(r);
        }
        blocks.push_back(std::move(b));
        first += count;
    }
    scanned = f.steps.rows;
}

std::vector<StepRecord> StepOverview::read(const TraceFile& f, const TraceMeta& meta, int run, std::int64_t from,
                                           std::int64_t to) const {
    return read_range<StepRecord>(blocks, meta, run, from, to, [&](const Block& b) {
        auto rows = f.read_records<s::StepTable>(f.steps, b.first, b.count);
        for (hsize_t i = 0; i < b.count; ++i) check_step_record(f, meta, rows[i], b.first + i);
        return rows;
    });
}

std::vector<ScalingRecord> read_scaling_rows(const TraceFile& f, const TraceMeta& meta, hsize_t first, hsize_t count) {
    if (f.scaling_amax.rows < first + count || f.scaling_scale.rows < first + count)
        throw f.fail("/scaling/amax or /scaling/scale has fewer rows than /scaling/index");
    auto rows = f.read_records<s::ScalingIndexTable>(f.scaling_index, first, count);
    const std::size_t cols = f.scaling_amax.cols, slots = f.slots;
    std::vector<float> amax(count * cols), scale(count * cols);
    f.read_rows(f.scaling_amax, first, count, amax.data());
    f.read_rows(f.scaling_scale, first, count, scale.data());
    for (hsize_t i = 0; i < count; ++i) {
        ScalingRecord& r = rows[i];
        if (r.run < 0 || r.run >= static_cast<int>(meta.runs.size()))
            throw f.fail(std::string(s::kScalingIndex) + " row " + std::to_string(first + i) + ": run " +
                         std::to_string(r.run) + " is not in /meta/runs");
        r.amax.assign(amax.begin() + i * cols, amax.begin() + i * cols + slots);
        r.scale.assign(scale.begin() + i * cols, scale.begin() + i * cols + slots);
    }
    return rows;
}

void ScalingOverview::scan(const TraceFile& f, const TraceMeta& meta, std::size_t buckets) {
    const std::size_t n_runs = meta.runs.size();
    if (runs.size() < n_runs) runs.resize(n_runs, SlotDecimator(buckets, f.slots));
    if (f.scaling_index.rows <= scanned) return;
    // As StepOverview::scan: the last block, if not full, is read again whole.
    if (!blocks.empty() && blocks.back().count < kBlockRows) blocks.pop_back();
    hsize_t first = blocks.empty() ? 0 : blocks.back().first + blocks.back().count;
    std::vector<SlotPoint> points(f.slots);
    while (first < f.scaling_index.rows) {
        const hsize_t count = std::min<hsize_t>(kBlockRows, f.scaling_index.rows - first);
        const auto rows = read_scaling_rows(f, meta, first, count);
        StepOverview::Block b{first, count, std::vector<std::int64_t>(n_runs, INT64_MAX), std::vector<std::int64_t>(n_runs, INT64_MIN)};
        for (hsize_t i = 0; i < count; ++i) {
            const ScalingRecord& r = rows[i];
            b.min[r.run] = std::min(b.min[r.run], r.step);
            b.max[r.run] = std::max(b.max[r.run], r.step);
            if (first + i < scanned) continue;
            for (std::size_t k = 0; k < points.size(); ++k) points[k] = {r.step, r.amax[k], r.scale[k]};
            runs[r.run].add(points);
        }
        blocks.push_back(std::move(b));
        first += count;
    }
    scanned = f.scaling_index.rows;
}

std::vector<ScalingRecord> ScalingOverview::read(const TraceFile& f, const TraceMeta& meta, int run, std::int64_t from,
                                                 std::int64_t to) const {
    return read_range<ScalingRecord>(blocks, meta, run, from, to,
                                     [&](const StepOverview::Block& b) { return read_scaling_rows(f, meta, b.first, b.count); });
}

}  // namespace fp8scope::trace
