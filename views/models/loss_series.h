// The series the Loss view draws that are not columns of the store: a run's loss and eval
// loss minus the baseline run's, the loss difference smoothed, the evaluated steps alone
// (step times are a column, in milliseconds). Derived here, from the store's columns, so that they are
// tested without widgets.
#pragma once

#include <vector>

#include "models/run_data.h"

namespace fp8scope::views {

// Points (step, value), steps ascending.
struct StepSeries {
    std::vector<double> step, value;
    std::size_t size() const { return step.size(); }
};

// `a` (a column of run `c`) minus `bv` (the same column of run `b`) at the steps both have
// with finite values (runs of one lock-step comparison share steps).
StepSeries difference(const StepColumns& c, const std::vector<double>& a, const StepColumns& b,
                      const std::vector<double>& bv);

// A run's difference to the baseline run: loss (raw), its EMA over `ema_span` steps
// (smoothing.h) and eval loss, each at the steps both runs have a finite value.
struct LossDifference {
    StepSeries raw, smoothed, eval;
};
LossDifference loss_difference(const StepColumns& run, const StepColumns& baseline, int ema_span);

// The steps that have a finite value of `v` (the eval loss: NaN except at evaluations).
StepSeries finite_points(const std::vector<double>& steps, const std::vector<double>& v);

}  // namespace fp8scope::views
