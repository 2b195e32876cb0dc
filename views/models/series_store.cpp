// Ingest of records into per-run columns. A step that is not newer than the run's last
// one means the run went back (a rewind to a checkpoint): the later entries are dropped so
// every series shows the history the run kept. A recipe switch renames its run in the
// metadata the views name runs from.
#include "models/series_store.h"

#include <algorithm>
#include <cmath>
#include <mutex>

#include "models/display_names.h"

namespace fp8scope::views {

SeriesStore::SeriesStore(QObject* parent) : QObject(parent) {}

std::uint64_t SeriesStore::reset(trace::TraceMeta meta, std::vector<RankRun> rank_runs) {
    std::uint64_t gen;
    {
        std::unique_lock lock(mutex_);
        data_ = TraceData{};
        data_.runs.resize(meta.runs.size());
        for (std::size_t r = 0; r < meta.runs.size(); ++r) data_.runs[r].info = meta.runs[r];
        data_.meta = std::move(meta);
        if (rank_runs.size() == data_.runs.size()) data_.rank_runs = std::move(rank_runs);
        for (auto& run : data_.runs) run.scaling.slot_count = data_.slot_count();
        if (data_.meta.world_size > 1) data_.ranks.resize(static_cast<std::size_t>(data_.meta.world_size));
        gen = ++generation_;
        ++revision_;
    }
    emit changed();
    return gen;
}

void SeriesStore::clear() {
    {
        std::unique_lock lock(mutex_);
        data_ = TraceData{};
        ++generation_;
        ++revision_;
    }
    emit changed();
}

bool SeriesStore::append(std::uint64_t generation, TraceBatch batch) {
    {
        std::unique_lock lock(mutex_);
        if (generation != generation_.load()) return false;
        append_locked(batch);
        ++revision_;
    }
    emit changed();
    return true;
}

namespace {

template <class V>
void cut(V& v, std::size_t n) {
    if (v.size() > n) v.resize(n);
}

// The number of rows of an ascending step column before `step`.
std::size_t rows_before(const std::vector<double>& steps, double step) {
    return static_cast<std::size_t>(std::lower_bound(steps.begin(), steps.end(), step) - steps.begin());
}

// Drops the rows of steps >= step.
void truncate_steps(StepColumns& c, double step) { c.truncate(rows_before(c.step, step)); }

void truncate_ranks(RankColumns& c, double step) {
    c.truncate(rows_before(c.step, step));
    const auto n = rows_before(c.error_step, step);
    cut(c.error_step, n);
    cut(c.grad_error, n);
}

void truncate_scaling(ScalingColumns& c, double step) {
    auto n = rows_before(c.step, step);
    cut(c.step, n);
    cut(c.amax, n * c.slot_count);
    cut(c.scale, n * c.slot_count);
    for (auto& points : c.decimated)
        std::erase_if(points, [&](const trace::SlotPoint& p) { return static_cast<double>(p.step) >= step; });
}

// Appends a scaling record's amax and scale as a row; a short (damaged) row is padded with
// NaN so every row keeps slot_count entries.
void push_scaling(ScalingColumns& c, const trace::ScalingRecord& s) {
    c.step.push_back(static_cast<double>(s.step));
    for (auto [dst, src] : {std::pair(&c.amax, &s.amax), std::pair(&c.scale, &s.scale)}) {
        const auto n = std::min<std::size_t>(src->size(), c.slot_count);
        dst->insert(dst->end(), src->begin(), src->begin() + n);
        dst->resize(dst->size() + (c.slot_count - n), NAN);
    }
}

// Replaces the scaling rows and decimated points of `c` at steps in [first, last] with
// `rows` (step ascending, all in the range) and `points` (by slot, step ascending, all in
// the range, taken; null: none).
void splice_scaling(ScalingColumns& c, std::int64_t first, std::int64_t last, const std::vector<const trace::ScalingRecord*>& rows,
                    std::vector<std::vector<trace::SlotPoint>>* points) {
    const auto in_range = [&](std::int64_t step) { return step >= first && step <= last; };
    const auto lo = rows_before(c.step, static_cast<double>(first));
    const auto hi = static_cast<std::size_t>(std::upper_bound(c.step.begin(), c.step.end(), static_cast<double>(last)) - c.step.begin());
    ScalingColumns added;
    added.slot_count = c.slot_count;
    for (const trace::ScalingRecord* r : rows) push_scaling(added, *r);
    const auto at = [](auto& v, std::size_t i) { return v.begin() + static_cast<std::ptrdiff_t>(i); };
    const std::size_t n = static_cast<std::size_t>(c.slot_count);
    c.step.erase(at(c.step, lo), at(c.step, hi));
    c.step.insert(at(c.step, lo), added.step.begin(), added.step.end());
    for (auto [dst, src] : {std::pair(&c.amax, &added.amax), std::pair(&c.scale, &added.scale)}) {
        dst->erase(at(*dst, lo * n), at(*dst, hi * n));
        dst->insert(at(*dst, lo * n), src->begin(), src->end());
    }
    for (auto& v : c.decimated) std::erase_if(v, [&](const trace::SlotPoint& p) { return in_range(p.step); });
    if (!points) return;
    if (c.decimated.size() < n) c.decimated.resize(n);
    for (std::size_t slot = 0; slot < n && slot < points->size(); ++slot) {
        auto& v = c.decimated[slot];
        auto& add = (*points)[slot];
        if (v.empty()) {
            v = std::move(add);
            continue;
        }
        const auto pos = std::lower_bound(v.begin(), v.end(), first, [](const trace::SlotPoint& p, std::int64_t s) { return p.step < s; });
        v.insert(pos, add.begin(), add.end());
    }
}

// Replaces the rows of `c` at steps in [first, last] with `rows` (step ascending, all in
// the range).
void splice_steps(StepColumns& c, std::int64_t first, std::int64_t last, const std::vector<trace::StepRecord>& rows) {
    const auto lo = rows_before(c.step, static_cast<double>(first));
    const auto hi = static_cast<std::size_t>(std::upper_bound(c.step.begin(), c.step.end(), static_cast<double>(last)) - c.step.begin());
    c.replace(lo, hi, rows);
}

// Replaces the sums of `v` (step ascending) at steps in [first, last] with those of `rows`
// in the range (step ascending, file order within a step).
void splice_sums(std::vector<trace::KernelStepRecord>& v, std::int64_t first, std::int64_t last,
                 const std::vector<trace::KernelStepRecord>& rows) {
    const auto by_step = [](const trace::KernelStepRecord& k, std::int64_t s) { return k.step < s; };
    const auto lo = std::lower_bound(v.begin(), v.end(), first, by_step);
    const auto hi = std::upper_bound(v.begin(), v.end(), last, [](std::int64_t s, const auto& k) { return s < k.step; });
    std::vector<trace::KernelStepRecord> in_range;
    for (const auto& k : rows)
        if (k.step >= first && k.step <= last) in_range.push_back(k);
    v.insert(v.erase(lo, hi), in_range.begin(), in_range.end());
}

// Replaces every rank's records at steps in [range.first, range.last]: those read whole go
// into its columns, the decimated ones beside them.
void splice_ranks(TraceData& d, const TraceBatch::StepRange& range, const std::vector<trace::RankStepRecord>& rows,
                  const std::vector<trace::RankStepRecord>& decimated) {
    const auto in_range = [&](std::int64_t s) { return s >= range.first && s <= range.last; };
    if (d.ranks_decimated.size() < d.ranks.size()) d.ranks_decimated.resize(d.ranks.size());
    for (std::size_t k = 0; k < d.ranks.size(); ++k) {
        std::vector<trace::RankStepRecord> mine;
        for (const auto& r : rows)
            if (r.rank == static_cast<std::int32_t>(k) && in_range(r.step)) mine.push_back(r);
        RankColumns& c = d.ranks[k];
        const auto lo = rows_before(c.step, static_cast<double>(range.first));
        const auto hi = static_cast<std::size_t>(std::upper_bound(c.step.begin(), c.step.end(), static_cast<double>(range.last)) - c.step.begin());
        c.replace(lo, hi, mine);
        // The measured sum errors, kept apart: the range's anew.
        const auto elo = rows_before(c.error_step, static_cast<double>(range.first));
        const auto ehi = static_cast<std::size_t>(std::upper_bound(c.error_step.begin(), c.error_step.end(), static_cast<double>(range.last)) - c.error_step.begin());
        std::vector<double> es;
        std::vector<float> ev;
        for (const auto& r : mine)
            if (std::isfinite(r.grad_error)) es.push_back(static_cast<double>(r.step)), ev.push_back(static_cast<float>(r.grad_error));
        c.error_step.insert(c.error_step.erase(c.error_step.begin() + static_cast<std::ptrdiff_t>(elo), c.error_step.begin() + static_cast<std::ptrdiff_t>(ehi)), es.begin(), es.end());
        c.grad_error.insert(c.grad_error.erase(c.grad_error.begin() + static_cast<std::ptrdiff_t>(elo), c.grad_error.begin() + static_cast<std::ptrdiff_t>(ehi)), ev.begin(), ev.end());
        auto& v = d.ranks_decimated[k];
        const auto by_step = [](const trace::RankStepRecord& r, std::int64_t s) { return r.step < s; };
        const auto dlo = std::lower_bound(v.begin(), v.end(), range.first, by_step);
        const auto dhi = std::upper_bound(v.begin(), v.end(), range.last, [](std::int64_t s, const auto& r) { return s < r.step; });
        std::vector<trace::RankStepRecord> kept;
        for (const auto& r : decimated)
            if (r.rank == static_cast<std::int32_t>(k) && in_range(r.step)) kept.push_back(r);
        v.insert(v.erase(dlo, dhi), kept.begin(), kept.end());
    }
}

// Replaces the records of `ops` at steps in [first, last] with `rows` (step ascending, all
// in the range).
void splice_ops(OpList& ops, std::int64_t first, std::int64_t last, const std::vector<trace::OpRecord>& rows) {
    const std::size_t lo = ops.of_step(first).first, hi = ops.of_step(last).second;
    std::vector<trace::OpRecord> after;
    after.reserve(ops.size() - hi);
    for (std::size_t i = hi; i < ops.size(); ++i) after.push_back(ops[i]);
    ops.truncate(lo);
    for (const auto& r : rows) ops.push_back(r);
    for (const auto& r : after) ops.push_back(r);
}

// The parts of [first, last] that none of `windows` covers, ascending.
std::vector<std::pair<std::int64_t, std::int64_t>> uncovered(std::int64_t first, std::int64_t last,
                                                             std::vector<std::pair<std::int64_t, std::int64_t>> windows) {
    std::sort(windows.begin(), windows.end());
    std::vector<std::pair<std::int64_t, std::int64_t>> out;
    for (const auto& [lo, hi] : windows) {
        if (first > last) break;
        if (hi < first || lo > last) continue;
        if (lo > first) out.push_back({first, lo - 1});
        if (hi >= last) return out;
        first = hi + 1;
    }
    if (first <= last) out.push_back({first, last});
    return out;
}

// Files an overview's window of op records read for [first, last] (the newest request) and
// drops the records of the oldest windows past kOpWindows, where no other window holds them.
void keep_op_window(TraceData& d, std::int64_t first, std::int64_t last) {
    auto& w = d.op_windows;
    std::erase(w, std::pair(first, last));
    w.push_back({first, last});
    while (w.size() > TraceData::kOpWindows) {
        const auto [lo, hi] = w.front();
        w.erase(w.begin());
        const std::int64_t end = d.detail_from == INT64_MIN ? hi : std::min(hi, d.detail_from - 1);  // the newest stay
        for (const auto& [a, b] : uncovered(lo, end, w))
            for (RunData& run : d.runs) splice_ops(run.ops, a, b, {});
    }
}

}  // namespace

void SeriesStore::append_locked(TraceBatch& batch) {
    auto& d = data_;
    if (batch.detail_from) d.detail_from = std::max(d.detail_from, *batch.detail_from);
    for (auto& k : batch.kernel_record_steps)
        if (k.run >= 0 && k.run < static_cast<std::int32_t>(d.runs.size())) d.runs[k.run].kernel_record_steps = std::move(k.steps);
    if (batch.scaling_at) d.scaling_at = *batch.scaling_at;
    if (batch.kernel_sums_at) d.kernel_sums_at = *batch.kernel_sums_at;
    if (batch.replace && (batch.replace->what & TraceBatch::Ops)) {
        const auto& r = *batch.replace;
        for (std::int32_t run : r.runs) {
            if (run < 0 || run >= static_cast<std::int32_t>(d.runs.size())) continue;
            std::vector<trace::OpRecord> rows;
            for (const auto& op : batch.ops)
                if (op.run == run && op.step >= r.first && op.step <= r.last) rows.push_back(op);
            std::stable_sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.step < b.step; });
            splice_ops(d.runs[run].ops, r.first, r.last, rows);
        }
        keep_op_window(d, r.first, r.last);
    }
    if (batch.replace && (batch.replace->what & TraceBatch::Ranks)) splice_ranks(d, *batch.replace, batch.ranks, batch.ranks_decimated);
    if (batch.replace) {
        const auto& r = *batch.replace;
        for (std::int32_t run : r.runs) {
            if (run < 0 || run >= static_cast<std::int32_t>(d.runs.size())) continue;
            if (r.what & TraceBatch::Scaling) {
                std::vector<const trace::ScalingRecord*> rows;
                for (const auto& s : batch.scaling)
                    if (s.run == run && s.step >= r.first && s.step <= r.last) rows.push_back(&s);
                std::sort(rows.begin(), rows.end(), [](const auto* a, const auto* b) { return a->step < b->step; });
                std::vector<std::vector<trace::SlotPoint>>* points = nullptr;  // moved from the batch
                for (auto& p : batch.scaling_points)
                    if (p.run == run) points = &p.by_slot;
                if (points)
                    for (auto& v : *points)
                        std::erase_if(v, [&](const trace::SlotPoint& p) { return p.step < r.first || p.step > r.last; });
                splice_scaling(d.runs[run].scaling, r.first, r.last, rows, points);
            }
            if (r.what & TraceBatch::KernelSums) {
                std::vector<trace::KernelStepRecord> mine, decimated;
                for (const auto& k : batch.kernel_steps)
                    if (k.run == run) mine.push_back(k);
                for (const auto& k : batch.kernel_steps_decimated)
                    if (k.run == run) decimated.push_back(k);
                splice_sums(d.runs[run].kernel_steps, r.first, r.last, mine);
                splice_sums(d.runs[run].kernel_steps_decimated, r.first, r.last, decimated);
            }
            if (!(r.what & TraceBatch::StepRecords)) continue;
            std::vector<trace::StepRecord> rows;
            for (const auto& s : batch.steps)
                if (s.run == run && s.step >= r.first && s.step <= r.last) rows.push_back(s);
            std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.step < b.step; });
            splice_steps(d.runs[run].steps, r.first, r.last, rows);
            for (const auto& s : rows) {
                d.first_step = d.first_step < 0 ? s.step : std::min(d.first_step, s.step);
                d.last_step = std::max(d.last_step, s.step);
            }
        }
        return;
    }
    const int slot_count = d.slot_count();
    auto run_of = [&](std::int32_t r) -> RunData* {
        return r >= 0 && r < static_cast<std::int32_t>(d.runs.size()) ? &d.runs[r] : nullptr;
    };
    auto see_step = [&](std::int64_t s) {
        d.first_step = d.first_step < 0 ? s : std::min(d.first_step, s);
        d.last_step = std::max(d.last_step, s);
    };
    // Names are handed out in order; one that skips an id is ignored.
    for (auto& n : batch.op_names)
        if (n.id == static_cast<std::int32_t>(d.meta.ops.size())) d.meta.ops.push_back(std::move(n.name));
    for (const auto& s : batch.steps) {
        RunData* run = run_of(s.run);
        if (!run) continue;
        auto& c = run->steps;
        if (!c.step.empty() && s.step <= c.step.back()) truncate_steps(c, static_cast<double>(s.step));
        c.push_back(s);
        see_step(s.step);
    }
    for (const auto& s : batch.scaling) {
        RunData* run = run_of(s.run);
        if (!run || slot_count == 0) continue;
        auto& c = run->scaling;
        if (!c.step.empty() && s.step <= c.step.back()) truncate_scaling(c, static_cast<double>(s.step));
        push_scaling(c, s);
        see_step(s.step);
    }
    for (const auto& o : batch.operands) {
        RunData* run = run_of(o.key.run);
        const int slot = trace::operand_slot(o.key.linear, o.key.gemm, o.key.operand);
        if (!run || slot < 0 || slot >= slot_count) continue;
        auto& steps = run->capture_steps;
        if (steps.empty() || o.key.step > steps.back()) {
            steps.push_back(o.key.step);
            run->operands.emplace_back(slot_count);
        } else if (o.key.step < steps.back()) {
            auto keep = std::lower_bound(steps.begin(), steps.end(), o.key.step) - steps.begin();
            if (steps[keep] != o.key.step) {  // went back to a step never captured
                steps.resize(keep);
                run->operands.resize(keep);
                steps.push_back(o.key.step);
                run->operands.emplace_back(slot_count);
            }
        }
        auto at = std::lower_bound(steps.begin(), steps.end(), o.key.step) - steps.begin();
        run->operands[at][slot] = OperandSummary(o);
        see_step(steps[at]);
    }
    for (const auto& g : batch.gemm_errors) {
        RunData* run = run_of(g.run);
        if (!run) continue;
        auto& v = run->gemm_errors;
        if (!v.empty() && g.step < v.back().step)  // a rewind: the re-recorded step replaces what followed
            v.erase(std::lower_bound(v.begin(), v.end(), g.step, [](const auto& e, std::int64_t s) { return e.step < s; }),
                    v.end());
        v.push_back(g);
    }
    for (const auto& a : batch.gate_up) {
        RunData* run = run_of(a.run);
        if (!run) continue;
        auto& v = run->gate_up;
        if (!v.empty() && a.step < v.back().step)  // a rewind, as for the GEMM errors
            v.erase(std::lower_bound(v.begin(), v.end(), a.step, [](const auto& e, std::int64_t s) { return e.step < s; }),
                    v.end());
        v.push_back(a);
    }
    for (auto& b : batch.blockmaps)
        if (RunData* run = run_of(b.key.run)) run->blockmaps.push_back(std::move(b));
    for (const auto& op : batch.ops) {
        RunData* run = run_of(op.run);
        if (!run) continue;
        if (!run->ops.empty() && op.step < run->ops.step(run->ops.size() - 1))
            run->ops.truncate(run->ops_of_step(op.step).first);
        run->ops.push_back(op);
    }
    for (const auto& k : batch.kernel_steps) {
        RunData* run = run_of(k.run);
        if (!run) continue;
        auto& v = run->kernel_steps;
        const auto same = [&](const trace::KernelStepRecord& o) {
            return o.op == k.op && o.parent == k.parent && o.kind == k.kind;
        };
        // A rewind: the re-recorded step replaces it and what followed; a step's sums
        // come once per kernel, so a kernel seen again at the newest step is its re-recording.
        if (!v.empty() && k.step <= v.back().step) {
            const auto [lo, hi] = run->kernel_steps_of(k.step);
            if (k.step < v.back().step || std::any_of(v.begin() + lo, v.begin() + hi, same)) {
                v.erase(v.begin() + static_cast<std::ptrdiff_t>(lo), v.end());
                std::erase_if(run->kernel_steps_decimated, [&](const auto& o) { return o.step >= k.step; });
            }
        }
        v.push_back(k);
        see_step(k.step);
    }
    for (const auto& k : batch.ranks) {
        if (k.rank < 0 || k.rank >= static_cast<std::int32_t>(d.ranks.size())) continue;
        auto& c = d.ranks[static_cast<std::size_t>(k.rank)];
        if (!c.step.empty() && k.step <= c.step.back()) {
            truncate_ranks(c, static_cast<double>(k.step));
            if (static_cast<std::size_t>(k.rank) < d.ranks_decimated.size())
                std::erase_if(d.ranks_decimated[static_cast<std::size_t>(k.rank)], [&](const auto& o) { return o.step >= k.step; });
        }
        c.push_back(k);
        if (std::isfinite(k.grad_error)) {
            c.error_step.push_back(static_cast<double>(k.step));
            c.grad_error.push_back(static_cast<float>(k.grad_error));
        }
    }
    bool switched = false;
    for (auto& e : batch.events) {
        switched = switched || e.kind == trace::EventKind::RecipeSwitch;
        d.events.push_back(std::move(e));
    }
    std::stable_sort(d.events.begin(), d.events.end(),
                     [](const auto& a, const auto& b) { return a.step < b.step; });
    // A recipe switch renames its run wherever runs are named; info keeps how it started.
    if (switched)
        for (std::size_t r = 0; r < d.runs.size() && r < d.meta.runs.size(); ++r)
            d.meta.runs[r].name = switched_run_name(d.runs[r].info.name, d.events, static_cast<int>(r));
}

}  // namespace fp8scope::views
