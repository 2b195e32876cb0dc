// Device records to runs and evaluation, by time.
#include "models/kernel_attribution.h"

#include <algorithm>
#include <cmath>
#include <string_view>

namespace fp8scope::views {

int eval_op_id(const trace::TraceMeta& meta) {
    auto it = std::find(meta.ops.begin(), meta.ops.end(), "eval");
    return it == meta.ops.end() ? -1 : static_cast<int>(it - meta.ops.begin());
}

StepKernel summed_kernel(const trace::TraceMeta& meta, const trace::KernelStepRecord& k) {
    StepKernel s;
    s.rec.run = k.run;
    s.rec.step = k.step;
    s.rec.op = k.op;
    s.rec.parent = k.parent;
    s.rec.kind = k.kind;
    s.rec.device = 0;
    s.rec.bytes = k.bytes;
    s.eval = k.parent >= 0 && k.parent == eval_op_id(meta);
    return s;
}

namespace {

bool recorded_eval(const TraceData& d, std::int64_t step) {
    for (const RunData& rd : d.runs) {
        const auto row = rd.step_row_at(step);
        if (row >= 0 && rd.steps.step[row] == static_cast<double>(step) &&
            std::isfinite(rd.steps[&trace::StepRecord::eval_loss][row]))
            return true;
    }
    return false;
}

bool named(const trace::TraceMeta& meta, const trace::OpRecord& r, std::string_view part) {
    return r.op >= 0 && r.op < static_cast<int>(meta.ops.size()) &&
           meta.ops[static_cast<std::size_t>(r.op)].find(part) != std::string::npos;
}

// Splits an evaluation block of records with no op among `runs` runs: the run boundaries
// are the embedding kernels that start each run's first batch, moved back over the
// copies just before them. Sets run and eval of block[i].
void split_eval(const trace::TraceMeta& meta, std::vector<StepKernel>& block, int runs) {
    std::vector<std::size_t> starts;  // of each forward
    for (std::size_t i = 0; i < block.size(); ++i)
        if (named(meta, block[i].rec, "embedding_forward")) starts.push_back(i);
    const bool even = runs > 0 && !starts.empty() && starts.size() % static_cast<std::size_t>(runs) == 0;
    const std::size_t per_run = even ? starts.size() / static_cast<std::size_t>(runs) : 0;
    std::vector<std::size_t> first(static_cast<std::size_t>(std::max(runs, 1)), 0);
    for (int r = 1; even && r < runs; ++r) {
        std::size_t at = starts[static_cast<std::size_t>(r) * per_run];
        while (at > 0 && named(meta, block[at - 1].rec, "memcpy")) --at;
        first[static_cast<std::size_t>(r)] = at;
    }
    for (int r = 0; r < static_cast<int>(first.size()); ++r) {
        const std::size_t end = r + 1 < static_cast<int>(first.size()) ? first[static_cast<std::size_t>(r) + 1] : block.size();
        for (std::size_t i = first[static_cast<std::size_t>(r)]; i < end; ++i) {
            block[i].rec.run = even ? r : 0;  // an uneven block stays with the first run
            block[i].eval = true;
        }
    }
}

}  // namespace

std::vector<StepKernel> step_kernels(const TraceData& d, int run, std::int64_t step) {
    std::vector<StepKernel> all;
    for (std::size_t r = 0; r < d.runs.size(); ++r) {
        const RunData& rd = d.runs[r];
        const auto [lo, hi] = rd.ops_of_step(step);
        for (auto i = lo; i < hi; ++i) {
            trace::OpRecord op = rd.ops[i];
            if (!is_device(op)) continue;
            // Records with an op are where the recorder put them; the others are decided below.
            if (op.parent >= 0 && static_cast<int>(r) != run) continue;
            op.run = static_cast<std::int32_t>(r);
            all.push_back({op, false});
        }
    }
    std::stable_sort(all.begin(), all.end(), [](const StepKernel& a, const StepKernel& b) { return a.rec.start_ns < b.rec.start_ns; });
    // The other runs' kernels with an op are only needed as landmarks: their times.
    std::vector<std::pair<std::int64_t, int>> marks;  // (start, run) of kernels with an op, all runs
    for (std::size_t r = 0; r < d.runs.size(); ++r) {
        const RunData& rd = d.runs[r];
        const auto [lo, hi] = rd.ops_of_step(step);
        for (auto i = lo; i < hi; ++i) {
            const trace::OpRecord op = rd.ops[i];
            if (is_device(op) && op.parent >= 0) marks.emplace_back(op.start_ns, static_cast<int>(r));
        }
    }
    std::sort(marks.begin(), marks.end());
    const int eval_op = eval_op_id(d.meta);
    std::vector<StepKernel> tail;
    std::vector<StepKernel> out;
    for (StepKernel& k : all) {
        if (k.rec.parent >= 0) {
            k.eval = eval_op >= 0 && k.rec.parent == eval_op;
            out.push_back(k);
            continue;
        }
        auto next = std::lower_bound(marks.begin(), marks.end(), std::pair{k.rec.start_ns, -1});
        if (next != marks.end()) {
            k.rec.run = next->second;
            if (k.rec.run == run) out.push_back(k);
        } else {
            tail.push_back(k);
        }
    }
    if (!tail.empty()) {
        if (recorded_eval(d, step) && eval_op < 0) {
            split_eval(d.meta, tail, static_cast<int>(d.runs.size()));
        } else {
            for (auto& k : tail) k.rec.run = marks.empty() ? 0 : marks.back().second;
        }
        for (auto& k : tail)
            if (k.rec.run == run) out.push_back(k);
    }
    std::stable_sort(out.begin(), out.end(), [](const StepKernel& a, const StepKernel& b) { return a.rec.start_ns < b.rec.start_ns; });
    return out;
}

}  // namespace fp8scope::views
