// Counter tracks from the run's step and scaling columns.
#include "models/counter_tracks.h"

#include <algorithm>
#include <cmath>

#include "models/display_names.h"

namespace fp8scope::views {

namespace {

// Rows of `steps` (ascending) within [first, last].
std::pair<std::size_t, std::size_t> rows_in(const std::vector<double>& steps, std::int64_t first, std::int64_t last) {
    const auto lo = std::lower_bound(steps.begin(), steps.end(), static_cast<double>(first));
    const auto hi = std::upper_bound(steps.begin(), steps.end(), static_cast<double>(last));
    return {static_cast<std::size_t>(lo - steps.begin()), static_cast<std::size_t>(hi - steps.begin())};
}

}  // namespace

std::vector<CounterTrack> counter_tracks(const TraceData& d, int run, std::int64_t first, std::int64_t last,
                                         const std::vector<OperandRef>& operands) {
    std::vector<CounterTrack> out;
    if (run < 0 || run >= static_cast<int>(d.runs.size())) return out;
    const RunData& rd = d.runs[static_cast<std::size_t>(run)];
    const auto [lo, hi] = rows_in(rd.steps.step, first, last);
    for (auto [name, field] : {std::pair{QStringLiteral("loss"), &trace::StepRecord::loss},
                               std::pair{QStringLiteral("learning rate"), &trace::StepRecord::lr}}) {
        CounterTrack t{name, {}};
        for (std::size_t i = lo; i < hi; ++i)
            t.points.emplace_back(static_cast<std::int64_t>(rd.steps.step[i]), rd.steps[field][i]);
        out.push_back(std::move(t));
    }
    for (const OperandRef& ref : operands) {
        const int slot = ref.slot();
        if (slot < 0 || slot >= rd.scaling.slot_count) continue;
        const QString label = short_operand_label(d.meta, ref);
        CounterTrack amax{"amax " + label, {}}, scale{"scale " + label, {}};
        // A large trace's steps outside the rows read whole: its decimated points.
        for (const trace::SlotPoint& p : rd.scaling.points(slot, static_cast<double>(first), static_cast<double>(last))) {
            amax.points.emplace_back(p.step, p.amax);
            scale.points.emplace_back(p.step, p.scale);
        }
        out.push_back(std::move(amax));
        if (std::any_of(scale.points.begin(), scale.points.end(), [](const auto& p) { return std::isfinite(p.second); }))
            out.push_back(std::move(scale));
    }
    return out;
}

}  // namespace fp8scope::views
