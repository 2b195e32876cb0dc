// One run compared with another in the views that show a run at a time (Amax, Error,
// Layers): which run to compare with by default, the other run's series of one operand,
// and whether two runs' operands of one linear are the same tensor at all. Traces of
// different models opened together share a linear of one name (TraceMerge) that can have
// other shapes in each: their figures are not differences of one tensor.
#pragma once

#include <QString>
#include <QVector>
#include <algorithm>

#include "models/series_store.h"

namespace fp8scope::views {

// The run `run` is compared with unless the user chooses: the baseline, or -1 when there
// is none or `run` is the baseline.
int default_compare_run(const trace::TraceMeta& meta, int run);

// The newest step <= `step` in both ascending step lists (a run's scaling or capture steps):
// two runs' figures are compared at one step, and a run that records amax only at its
// capture steps (a float32 baseline) or captures on another cadence (another trace) has
// none at the others. -1 when there is none.
template <class A, class B>
std::int64_t newest_common_step(const A& a, const B& b, std::int64_t step) {
    auto ia = std::upper_bound(a.begin(), a.end(), static_cast<double>(step), [](double s, auto x) { return s < static_cast<double>(x); });
    auto ib = std::upper_bound(b.begin(), b.end(), static_cast<double>(step), [](double s, auto x) { return s < static_cast<double>(x); });
    while (ia != a.begin() && ib != b.begin()) {
        const double sa = static_cast<double>(*(ia - 1)), sb = static_cast<double>(*(ib - 1));
        if (sa == sb) return static_cast<std::int64_t>(sa);
        if (sa > sb) --ia;
        else --ib;
    }
    return -1;
}

// Element counts of the two runs' newest captures of `ref` at or before `step`; 0 where a
// run has none.
std::pair<std::int64_t, std::int64_t> compared_numel(const TraceData& d, int run, int other, const OperandRef& ref,
                                                     std::int64_t step);
// Why `ref` of `run` and of `other` cannot be compared figure by figure (their element
// counts differ: the same name in two models); empty when they can or one is not captured.
QString shapes_differ_note(const TraceData& d, int run, int other, const OperandRef& ref, std::int64_t step);

// Amax and scale in use of one operand slot at every step of a run (NaN where not recorded).
struct SlotSeries {
    QVector<double> step, amax, scale;
};
SlotSeries slot_series(const RunData& rd, int slot);

}  // namespace fp8scope::views
