// Alignment lines and the most aligned MLP at a step.
#include "models/gate_up_alignment.h"

#include <algorithm>
#include <map>

namespace fp8scope::views {

std::vector<AlignmentLine> alignment_lines(const RunData& run) {
    std::map<int, AlignmentLine> by_linear;
    for (const auto& a : run.gate_up) {
        AlignmentLine& l = by_linear[a.linear];
        l.linear = a.linear;
        if (!l.step.empty() && double(a.step) <= l.step.back()) {  // re-recorded after a rewind: the later row
            const auto keep = std::lower_bound(l.step.begin(), l.step.end(), double(a.step)) - l.step.begin();
            l.step.resize(std::size_t(keep));
            l.max_abs_cos.resize(std::size_t(keep));
        }
        l.step.push_back(double(a.step));
        l.max_abs_cos.push_back(a.max_abs_cos);
    }
    std::vector<AlignmentLine> out;
    for (auto& [linear, l] : by_linear) out.push_back(std::move(l));
    return out;
}

const trace::GateUpAlignmentRecord* most_aligned_at(const RunData& run, std::int64_t step) {
    // Rows are step ascending: the newest step <= `step`, then its largest max |cos|.
    const auto end = std::upper_bound(run.gate_up.begin(), run.gate_up.end(), step,
                                      [](std::int64_t s, const trace::GateUpAlignmentRecord& a) { return s < a.step; });
    if (end == run.gate_up.begin()) return nullptr;
    const std::int64_t at = std::prev(end)->step;
    const trace::GateUpAlignmentRecord* best = nullptr;
    for (auto it = std::prev(end);; --it) {
        if (it->step != at) break;
        if (!best || it->max_abs_cos > best->max_abs_cos) best = &*it;
        if (it == run.gate_up.begin()) break;
    }
    return best;
}

}  // namespace fp8scope::views
