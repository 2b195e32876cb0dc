// Lookups into a run's columns: binary searches over ascending steps.
#include "models/run_data.h"

#include <algorithm>

namespace fp8scope::views {

std::vector<trace::SlotPoint> ScalingColumns::points(int slot, double first, double last) const {
    std::vector<trace::SlotPoint> out;
    if (slot < 0 || slot >= slot_count) return out;
    const auto lo = std::lower_bound(step.begin(), step.end(), first) - step.begin();
    const auto hi = std::upper_bound(step.begin(), step.end(), last) - step.begin();
    for (auto i = lo; i < hi; ++i)
        out.push_back({static_cast<std::int64_t>(step[i]), amax_at(static_cast<std::size_t>(i), slot),
                       scale_at(static_cast<std::size_t>(i), slot)});
    if (static_cast<std::size_t>(slot) >= decimated.size() || decimated[slot].empty()) return out;
    const std::size_t rows_end = out.size();
    for (const trace::SlotPoint& p : decimated[slot])
        if (static_cast<double>(p.step) >= first && static_cast<double>(p.step) <= last) out.push_back(p);
    // The rows and the decimated points hold different steps, each ascending.
    std::inplace_merge(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(rows_end), out.end(),
                       [](const trace::SlotPoint& a, const trace::SlotPoint& b) { return a.step < b.step; });
    return out;
}

std::ptrdiff_t RunData::capture_index_at(std::int64_t step) const {
    auto it = std::upper_bound(capture_steps.begin(), capture_steps.end(), step);
    return (it - capture_steps.begin()) - 1;
}

const OperandSummary* RunData::operand(std::ptrdiff_t capture_index, const OperandRef& ref) const {
    const int slot = ref.slot();
    if (capture_index < 0 || capture_index >= static_cast<std::ptrdiff_t>(operands.size()) || slot < 0)
        return nullptr;
    const auto& at = operands[capture_index];
    if (slot >= static_cast<int>(at.size()) || at[slot].absent()) return nullptr;
    return &at[slot];
}

const OperandSummary* RunData::operand_at(std::int64_t step, const OperandRef& ref) const {
    return operand(capture_index_at(step), ref);
}

static bool same_operand(const trace::OperandKey& k, const OperandRef& ref) {
    return k.linear == ref.linear && k.gemm == ref.gemm && k.operand == ref.operand;
}

std::int64_t RunData::blockmap_step_at(std::int64_t step, const OperandRef& ref) const {
    std::int64_t best = -1;
    for (const auto& b : blockmaps)
        if (same_operand(b.key, ref) && b.key.step <= step) best = std::max(best, b.key.step);
    return best;
}

std::vector<const trace::BlockMapRecord*> RunData::blockmaps_of(std::int64_t step, const OperandRef& ref) const {
    std::vector<const trace::BlockMapRecord*> out;
    for (const auto& b : blockmaps)
        if (same_operand(b.key, ref) && b.key.step == step) out.push_back(&b);
    std::sort(out.begin(), out.end(), [](auto* a, auto* b) { return a->quantizer < b->quantizer; });
    return out;
}

std::pair<std::size_t, std::size_t> RunData::ops_of_step(std::int64_t step) const { return ops.of_step(step); }

namespace {
// The sums of `step` in `v` (step ascending).
std::span<const trace::KernelStepRecord> sums_of(const std::vector<trace::KernelStepRecord>& v, std::int64_t step) {
    const auto by_step = [](const trace::KernelStepRecord& k, std::int64_t s) { return k.step < s; };
    const auto lo = std::lower_bound(v.begin(), v.end(), step, by_step);
    auto hi = lo;
    while (hi != v.end() && hi->step == step) ++hi;
    return {lo, hi};
}
}  // namespace

std::pair<std::size_t, std::size_t> RunData::kernel_steps_of(std::int64_t step) const {
    const auto s = sums_of(kernel_steps, step);
    const auto lo = static_cast<std::size_t>(s.data() - kernel_steps.data());
    return {lo, lo + s.size()};
}

std::span<const trace::KernelStepRecord> RunData::step_sums(std::int64_t step) const {
    const auto whole = sums_of(kernel_steps, step);
    return whole.empty() ? sums_of(kernel_steps_decimated, step) : whole;
}

std::ptrdiff_t RunData::step_row_at(std::int64_t step) const {
    auto it = std::upper_bound(steps.step.begin(), steps.step.end(), static_cast<double>(step));
    return (it - steps.step.begin()) - 1;
}

std::vector<std::pair<int, int>> job_runs(const TraceData& d, int run) {
    if (run < 0 || run >= static_cast<int>(d.rank_runs.size())) return {{run, -1}};
    std::vector<std::pair<int, int>> out;
    for (int r = 0; r < static_cast<int>(d.rank_runs.size()); ++r)
        if (d.rank_runs[r].run == d.rank_runs[run].run) out.push_back({r, d.rank_runs[r].rank});
    std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
    return out;
}

}  // namespace fp8scope::views
