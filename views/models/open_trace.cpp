// Incremental reading of a trace file into store batches (see open_trace.h).
#include "models/open_trace.h"

#include <algorithm>
#include <limits>

#include "models/display_names.h"
#include "trace_reader.h"

namespace fp8scope::views {

OpenTrace::OpenTrace(const std::string& path, std::uint64_t large_rows)
    : reader_(std::make_unique<trace::TraceReader>(path, trace::LargeTraceOptions{.min_step_rows = large_rows,
                                                                                  .tail_steps = kTailSteps})) {
    const trace::TraceMeta& m = reader_->meta();
    steps_read_.assign(m.runs.size(), 0);
    done_.assign(m.runs.size(), std::nullopt);
    ops_known_ = m.ops.size();
}

OpenTrace::~OpenTrace() = default;

const trace::TraceMeta& OpenTrace::meta() const { return reader_->meta(); }

bool OpenTrace::refresh() { return reader_->refresh(); }

bool OpenTrace::overview() const { return reader_->overview(); }

TraceBatch OpenTrace::steps(std::int64_t first, std::int64_t last) const {
    TraceBatch b;
    b.replace = TraceBatch::StepRange{first, last, {}};
    const auto runs = static_cast<int>(meta().runs.size());
    // The amax and scale of every slot at every step of a wide range would take more memory
    // than the rest of the trace: such a range has them decimated anew, but for the newest
    // steps, which stay whole.
    const double values = static_cast<double>(last - first + 1) * runs * static_cast<double>(meta().linears.size()) *
                          trace::kOperandsPerLinear;
    const bool scaling_whole = values <= kDetailScalingValues;
    // The same for the kernel sums, at as many a step as the newest steps have.
    if (static_cast<double>(last - first + 1) * kernelSumsPerStep() > kDetailKernelSums)
        b.replace->what &= ~TraceBatch::KernelSums;
    for (int run = 0; run < runs; ++run) {
        b.replace->runs.push_back(run);
        for (const auto& s : reader_->steps(run, first, last)) b.steps.push_back(s);
        const std::int64_t whole_from = scaling_whole ? first : std::max(first, reader_->detail_from());
        if (whole_from > first)
            b.scaling_points.push_back({run, reader_->scaling_overview(run, first, std::min(last, whole_from - 1))});
        for (auto& s : reader_->scaling_detail(run, whole_from, last)) b.scaling.push_back(std::move(s));
        if (b.replace->what & TraceBatch::KernelSums)
            for (const auto& k : reader_->kernel_steps_detail(run, first, last)) b.kernel_steps.push_back(k);
    }
    b.ranks = reader_->rank_steps_detail(first, last);
    return b;
}

TraceBatch OpenTrace::replacing(std::int64_t first, std::int64_t last, int what,
                                const std::function<void(TraceBatch&, int run)>& read) const {
    TraceBatch b;
    b.replace = TraceBatch::StepRange{first, last, {}, what};
    for (int run = 0; run < static_cast<int>(meta().runs.size()); ++run) {
        b.replace->runs.push_back(run);
        read(b, run);
    }
    return b;
}

TraceBatch OpenTrace::kernelRecords(std::int64_t first, std::int64_t last) const {
    if (reader_->detail_from() > std::numeric_limits<std::int64_t>::min())
        last = std::min(last, reader_->detail_from() - 1);
    if (!overview() || first > last) return {};
    return replacing(first, last, TraceBatch::Ops, [&](TraceBatch& out, int run) {
        for (auto& op : reader_->ops_detail(run, first, last)) out.ops.push_back(std::move(op));
    });
}

TraceBatch OpenTrace::scalingAt(std::int64_t step) const {
    if (!overview() || step >= reader_->detail_from()) return {};  // read whole already
    TraceBatch b = replacing(step, step, TraceBatch::Scaling, [&](TraceBatch& out, int run) {
        for (auto& s : reader_->scaling_detail(run, step, step)) out.scaling.push_back(std::move(s));
    });
    b.scaling_at = step;
    return b;
}

TraceBatch OpenTrace::kernelSumsAt(std::int64_t step) const {
    if (!overview() || step >= reader_->detail_from()) return {};  // read whole already
    TraceBatch b = replacing(step, step, TraceBatch::KernelSums, [&](TraceBatch& out, int run) {
        for (const auto& k : reader_->kernel_steps_detail(run, step, step)) out.kernel_steps.push_back(k);
    });
    b.kernel_sums_at = step;
    return b;
}

double OpenTrace::kernelSumsPerStep() const {
    if (!overview()) return 0;
    const std::int64_t from = reader_->detail_from();
    double sums = 0;
    std::int64_t newest = from;
    for (int run = 0; run < static_cast<int>(meta().runs.size()); ++run) {
        sums += static_cast<double>(reader_->kernel_steps(run, from, INT64_MAX).size());
        newest = std::max(newest, reader_->last_step(run));
    }
    return sums / static_cast<double>(std::max<std::int64_t>(newest - from + 1, 1));
}

TraceBatch OpenTrace::decimated(std::int64_t first, std::int64_t last, int what) const {
    // The newest steps stay whole.
    if (reader_->detail_from() > std::numeric_limits<std::int64_t>::min())
        last = std::min(last, reader_->detail_from() - 1);
    TraceBatch b;
    if (first > last) return b;  // within the newest steps: nothing to put back
    b.replace = TraceBatch::StepRange{first, last, {}, what};
    const auto in_range = [&](std::int64_t step) { return step >= first && step <= last; };
    for (int run = 0; run < static_cast<int>(meta().runs.size()); ++run) {
        b.replace->runs.push_back(run);
        if (what & TraceBatch::StepRecords)
            for (const auto& s : reader_->step_overview(run))
                if (in_range(s.step)) b.steps.push_back(s);
        if (what & TraceBatch::KernelSums) {
            for (const auto& k : reader_->kernel_step_overview(run))
                if (in_range(k.step)) b.kernel_steps_decimated.push_back(k);
            // Read in the same pass over the sums: where the timeline can show records.
            b.kernel_record_steps.push_back({run, reader_->kernel_record_steps(run)});
        }
        if (what & TraceBatch::Scaling) {
            TraceBatch::SlotPoints p{run, reader_->scaling_overview(run)};
            for (auto& v : p.by_slot) std::erase_if(v, [&](const trace::SlotPoint& s) { return !in_range(s.step); });
            b.scaling_points.push_back(std::move(p));
        }
    }
    if (what & TraceBatch::Ranks)
        for (const auto& k : reader_->rank_overview())
            if (in_range(k.step)) b.ranks_decimated.push_back(k);
    return b;
}

// What one readNew() reads of a run: its new step records and the windows of steps that
// have records, each of at most kBatchSteps steps.
struct OpenTrace::RunPlan {
    int run = 0;
    std::int64_t limit = -1;  // the newest step record: where the run is now
    std::vector<std::pair<std::int64_t, std::int64_t>> windows;  // [first, last] step
    std::vector<std::vector<trace::StepRecord>> steps;          // per window, step ascending
    std::vector<std::int64_t> captures, blockmaps;               // in the planned range
};

std::int64_t OpenTrace::readNew(const std::function<void(TraceBatch&&)>& push, const Progress& progress) {
    const trace::TraceMeta& m = reader_->meta();
    TraceBatch head;  // kernel names, events and rank records that appeared since the last read
    for (std::size_t id = ops_known_; id < m.ops.size(); ++id)
        head.op_names.push_back({static_cast<std::int32_t>(id), m.ops[id]});
    ops_known_ = m.ops.size();
    auto events = reader_->events();
    if (events.size() > events_read_)
        head.events.assign(events.begin() + static_cast<std::ptrdiff_t>(events_read_), events.end());
    events_read_ = std::max(events_read_, events.size());
    auto ranks = reader_->rank_steps();
    if (ranks.size() > ranks_read_)
        head.ranks.assign(ranks.begin() + static_cast<std::ptrdiff_t>(ranks_read_), ranks.end());
    ranks_read_ = std::max(ranks_read_, ranks.size());
    if (overview()) head.detail_from = reader_->detail_from();
    push(std::move(head));

    std::vector<RunPlan> plans;
    std::size_t total = 0, done = 0, most = 0;
    for (int run = 0; run < static_cast<int>(m.runs.size()); ++run) {
        plans.push_back(plan(run));
        total += plans.back().windows.size();
        most = std::max(most, plans.back().windows.size());
    }
    // Round robin over the runs, so that every run's plots grow together.
    for (std::size_t w = 0; w < most; ++w)
        for (const RunPlan& p : plans) {
            if (w >= p.windows.size()) continue;
            readWindow(p, w, push);
            if (progress) progress(++done, total);
        }
    std::int64_t newest = -1;
    for (const RunPlan& p : plans) {
        if (p.windows.empty()) continue;
        done_[p.run] = p.limit;
        newest = std::max(newest, p.limit);
    }
    // An overview: the steps before the newest, decimated, once the newest are shown; the
    // step records first (one pass over /steps), the ranks' step times, the kernel sums,
    // then the amax and scale (the longest pass).
    if (overview() && !decimated_sent_ && reader_->detail_from() > std::numeric_limits<std::int64_t>::min()) {
        for (int what : {TraceBatch::StepRecords, TraceBatch::Ranks, TraceBatch::KernelSums, TraceBatch::Scaling})
            push(decimated(std::numeric_limits<std::int64_t>::min(), reader_->detail_from() - 1, what));
        decimated_sent_ = true;
    }
    return newest;
}

OpenTrace::RunPlan OpenTrace::plan(int run) {
    const trace::TraceReader& reader = *reader_;
    RunPlan p;
    p.run = run;
    auto all = reader.steps(run);
    if (all.size() <= steps_read_[run]) return p;
    // The records that stand: one that a later record goes back before or to (a rewind)
    // was abandoned. What stands is ascending.
    std::vector<trace::StepRecord> kept;
    for (std::size_t i = all.size(); i-- > steps_read_[run];)
        if (kept.empty() || all[i].step < kept.back().step) kept.push_back(all[i]);
    std::reverse(kept.begin(), kept.end());
    steps_read_[run] = all.size();
    const std::int64_t first = kept.front().step;
    p.limit = kept.back().step;
    std::optional<std::int64_t>& done = done_[run];
    if (done && first <= *done) {  // a rewind: re-read from there (first - 1 would wrap at INT64_MIN)
        if (first == std::numeric_limits<std::int64_t>::min()) done.reset();
        else done = first - 1;
    }
    // No overflow: past the rewind check, *done < first <= INT64_MAX.
    const std::int64_t from = done ? *done + 1 : std::numeric_limits<std::int64_t>::min();
    const auto in_range = [&](std::vector<std::int64_t> v) {
        v.erase(std::remove_if(v.begin(), v.end(), [&](std::int64_t s) { return s < from || s > p.limit; }), v.end());
        return v;
    };
    p.captures = in_range(reader.capture_steps(run));
    p.blockmaps = in_range(reader.blockmap_steps(run));
    // The steps that have records of any kind; the windows follow them, never the span of
    // step numbers.
    std::vector<std::int64_t> keys = reader.row_steps(run, from, p.limit);
    for (const auto& s : kept) keys.push_back(s.step);
    keys.insert(keys.end(), p.captures.begin(), p.captures.end());
    keys.insert(keys.end(), p.blockmaps.begin(), p.blockmaps.end());
    std::sort(keys.begin(), keys.end());
    keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
    auto record = kept.begin();
    for (std::size_t i = 0; i < keys.size(); i += kBatchSteps) {
        const std::int64_t lo = keys[i], hi = keys[std::min(keys.size(), i + kBatchSteps) - 1];
        p.windows.push_back({lo, hi});
        auto end = std::upper_bound(record, kept.end(), hi, [](std::int64_t s, const auto& r) { return s < r.step; });
        p.steps.emplace_back(record, end);
        record = end;
    }
    return p;
}

void OpenTrace::readWindow(const RunPlan& p, std::size_t window, const std::function<void(TraceBatch&&)>& push) const {
    const trace::TraceReader& reader = *reader_;
    const auto [lo, hi] = p.windows[window];
    const auto within = [lo = lo, hi = hi](const std::vector<std::int64_t>& v) {
        return std::pair(std::lower_bound(v.begin(), v.end(), lo), std::upper_bound(v.begin(), v.end(), hi));
    };
    TraceBatch b;
    b.steps = p.steps[window];
    b.scaling = reader.scaling(p.run, lo, hi);
    b.ops = reader.ops(p.run, lo, hi);
    // A file before format 6 kept every kernel record: the views read those, and sums made
    // from them would only cost the reading of every run's records once more.
    if (reader.meta().format_version >= 6) b.kernel_steps = reader.kernel_steps(p.run, lo, hi);
    for (auto [it, end] = within(p.captures); it != end; ++it)
        for (auto& o : reader.operands(p.run, *it)) b.operands.push_back(std::move(o));
    for (auto& g : reader.gemm_errors(p.run))
        if (g.step >= lo && g.step <= hi) b.gemm_errors.push_back(g);
    for (auto& a : reader.gate_up_alignment(p.run))
        if (a.step >= lo && a.step <= hi) b.gate_up.push_back(a);
    const auto refs = all_operands(static_cast<int>(reader.meta().linears.size()));
    for (auto [it, end] = within(p.blockmaps); it != end; ++it)
        for (const OperandRef& r : refs)
            for (auto& m : reader.blockmaps({p.run, *it, r.linear, r.gemm, r.operand})) b.blockmaps.push_back(std::move(m));
    push(std::move(b));
}

}  // namespace fp8scope::views
