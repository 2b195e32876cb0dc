// Loss series derived from the store's step columns.
#include "models/loss_series.h"

#include <cmath>

#include "models/smoothing.h"

namespace fp8scope::views {

StepSeries difference(const StepColumns& c, const std::vector<double>& a, const StepColumns& b,
                      const std::vector<double>& bv) {
    StepSeries out;
    std::size_t j = 0;
    for (std::size_t i = 0; i < c.size(); ++i) {
        while (j < b.size() && b.step[j] < c.step[i]) ++j;
        if (j < b.size() && b.step[j] == c.step[i] && std::isfinite(a[i]) && std::isfinite(bv[j])) {
            out.step.push_back(c.step[i]);
            out.value.push_back(a[i] - bv[j]);
        }
    }
    return out;
}

LossDifference loss_difference(const StepColumns& run, const StepColumns& baseline, int ema_span) {
    using R = trace::StepRecord;
    LossDifference out;
    out.raw = difference(run, run[&R::loss], baseline, baseline[&R::loss]);
    out.smoothed = {out.raw.step, ema(out.raw.value, ema_span)};
    out.eval = difference(run, run[&R::eval_loss], baseline, baseline[&R::eval_loss]);
    return out;
}

StepSeries finite_points(const std::vector<double>& steps, const std::vector<double>& v) {
    StepSeries out;
    for (std::size_t i = 0; i < steps.size() && i < v.size(); ++i)
        if (std::isfinite(v[i])) {
            out.step.push_back(steps[i]);
            out.value.push_back(v[i]);
        }
    return out;
}

}  // namespace fp8scope::views
