// One pass over a large trace's steps, and ranges read back from it (reader_overview.h).
#include "reader_overview.h"

#include <algorithm>
#include <string>

namespace fp8scope::trace {
namespace s = schema;

void check_step_record(const TraceFile& f, const TraceMeta& meta, StepRecord& r, hsize_t row) {
    if (r.run < 0 || r.run >= static_cast<int>(meta.runs.size()))
        throw f.fail(std::string(s::kSteps) + " row " + std::to_string(row) + ": run " + std::to_string(r.run) +
                     " is not in /meta/runs");
    if (r.recipe < -1 || r.recipe >= static_cast<int>(meta.training_recipes.size()))
        throw f.fail(std::string(s::kSteps) + " row " + std::to_string(row) + ": recipe " + std::to_string(r.recipe) +
                     " is not in the recipe table");
    if (f.format_version < 4) r.step_ms *= 1e3;  // step_time_s, in seconds
}

std::vector<StepRecord> standing_records(const std::vector<StepRecord>& rows, std::int64_t later_min) {
    std::vector<StepRecord> kept;
    for (std::size_t i = rows.size(); i-- > 0;) {
        if (rows[i].step < later_min) kept.push_back(rows[i]);
        later_min = std::min(later_min, rows[i].step);
    }
    std::reverse(kept.begin(), kept.end());
    return kept;
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
    if (run < 0 || run >= static_cast<int>(meta.runs.size()) || from > to) return {};
    // From the last block back: the smallest step after each block decides what stands.
    std::vector<StepRecord> out;
    std::int64_t later_min = INT64_MAX;
    std::vector<std::vector<StepRecord>> parts;  // newest block first
    for (std::size_t k = blocks.size(); k-- > 0;) {
        const Block& b = blocks[k];
        if (b.min[run] <= to && b.max[run] >= from && b.min[run] < later_min) {
            std::vector<StepRecord> mine;
            auto rows = f.read_records<s::StepTable>(f.steps, b.first, b.count);
            for (hsize_t i = 0; i < b.count; ++i) {
                StepRecord& r = rows[i];
                check_step_record(f, meta, r, b.first + i);
                if (r.run == run) mine.push_back(r);
            }
            std::vector<StepRecord> kept = standing_records(mine, later_min);
            kept.erase(std::remove_if(kept.begin(), kept.end(), [&](const StepRecord& r) { return r.step < from || r.step > to; }),
                       kept.end());
            parts.push_back(std::move(kept));
        }
        later_min = std::min(later_min, b.min[run]);
    }
    for (std::size_t k = parts.size(); k-- > 0;) out.insert(out.end(), parts[k].begin(), parts[k].end());
    return out;
}

}  // namespace fp8scope::trace
