// Incremental reading of a trace file into store batches (see open_trace.h).
#include "models/open_trace.h"

#include <algorithm>
#include <limits>

#include "models/display_names.h"
#include "trace_reader.h"

namespace fp8scope::views {

OpenTrace::OpenTrace(const std::string& path) : reader_(std::make_unique<trace::TraceReader>(path)) {
    const trace::TraceMeta& m = reader_->meta();
    steps_read_.assign(m.runs.size(), 0);
    done_.assign(m.runs.size(), std::nullopt);
    ops_known_ = m.ops.size();
}

OpenTrace::~OpenTrace() = default;

const trace::TraceMeta& OpenTrace::meta() const { return reader_->meta(); }

bool OpenTrace::refresh() { return reader_->refresh(); }

std::int64_t OpenTrace::readNew(const std::function<void(TraceBatch&&)>& push) {
    const trace::TraceMeta& m = reader_->meta();
    TraceBatch head;  // kernel names and events that appeared since the last read
    for (std::size_t id = ops_known_; id < m.ops.size(); ++id)
        head.op_names.push_back({static_cast<std::int32_t>(id), m.ops[id]});
    ops_known_ = m.ops.size();
    auto events = reader_->events();
    if (events.size() > events_read_)
        head.events.assign(events.begin() + static_cast<std::ptrdiff_t>(events_read_), events.end());
    events_read_ = std::max(events_read_, events.size());
    push(std::move(head));

    std::int64_t newest = -1;
    for (int run = 0; run < static_cast<int>(m.runs.size()); ++run) newest = std::max(newest, readRun(run, push));
    return newest;
}

std::int64_t OpenTrace::readRun(int run, const std::function<void(TraceBatch&&)>& push) {
    const trace::TraceReader& reader = *reader_;
    auto all = reader.steps(run);
    if (all.size() <= steps_read_[run]) return -1;
    TraceBatch steps;
    steps.steps.assign(all.begin() + static_cast<std::ptrdiff_t>(steps_read_[run]), all.end());
    steps_read_[run] = all.size();
    std::int64_t first = std::numeric_limits<std::int64_t>::max(), limit = -1;
    for (const auto& s : steps.steps) {
        first = std::min(first, s.step);
        limit = s.step;  // the newest record says where the run is now
    }
    std::optional<std::int64_t>& done = done_[run];
    if (done && first <= *done) {  // a rewind: re-read from there (first - 1 would wrap at INT64_MIN)
        if (first == std::numeric_limits<std::int64_t>::min()) done.reset();
        else done = first - 1;
    }
    // No overflow: past the rewind check, *done < first <= INT64_MAX.
    const std::int64_t from = done ? *done + 1 : std::numeric_limits<std::int64_t>::min();
    push(std::move(steps));
    const std::vector<std::int64_t> present = reader.row_steps(run, from, limit);
    for (std::size_t i = 0; i < present.size(); i += static_cast<std::size_t>(kBatchSteps)) {
        const std::int64_t lo = present[i];
        const std::int64_t hi = present[std::min(present.size(), i + static_cast<std::size_t>(kBatchSteps)) - 1];
        TraceBatch b;
        b.scaling = reader.scaling(run, lo, hi);
        b.ops = reader.ops(run, lo, hi);
        push(std::move(b));
    }
    for (std::int64_t step : reader.capture_steps(run)) {
        if (step < from || step > limit) continue;
        TraceBatch b;
        b.operands = reader.operands(run, step);
        push(std::move(b));
    }
    const auto refs = all_operands(static_cast<int>(reader.meta().linears.size()));
    for (std::int64_t step : reader.blockmap_steps(run)) {
        if (step < from || step > limit) continue;
        TraceBatch b;
        for (const OperandRef& r : refs)
            for (auto& m : reader.blockmaps({run, step, r.linear, r.gemm, r.operand})) b.blockmaps.push_back(std::move(m));
        push(std::move(b));
    }
    done = limit;
    return limit;
}

}  // namespace fp8scope::views
