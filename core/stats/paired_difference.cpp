// Paired differences over seeds and their Student t intervals.
#include "stats/paired_difference.h"

#include <cstddef>

#include "stats/student_t.h"

namespace fp8scope::stats {

PairedDifference paired_difference(const std::vector<double>& recipe, const std::vector<double>& baseline,
                                   double confidence) {
    PairedDifference out;
    std::vector<double> d;
    double base = 0;
    for (std::size_t i = 0; i < recipe.size() && i < baseline.size(); ++i)
        if (std::isfinite(recipe[i]) && std::isfinite(baseline[i])) {
            d.push_back(recipe[i] - baseline[i]);
            base += baseline[i];
        }
    out.n = static_cast<int>(d.size());
    if (d.empty()) return out;
    double sum = 0;
    for (double x : d) sum += x;
    out.mean = sum / out.n;
    out.baseline_mean = base / out.n;
    if (out.n < 2) return out;
    double ss = 0;
    for (double x : d) ss += (x - out.mean) * (x - out.mean);
    out.sd = std::sqrt(ss / (out.n - 1));
    out.half_width = student_t_quantile(0.5 + confidence / 2, out.n - 1) * out.sd / std::sqrt(double(out.n));
    return out;
}

std::optional<double> GapCurve::first_outside() const {
    std::optional<double> first;
    for (std::size_t j = at.size(); j-- > 0 && at[j].significant();) first = step[j];
    return first;
}

GapCurve gap_curve(const std::vector<double>& step, const std::vector<std::vector<double>>& recipe,
                   const std::vector<std::vector<double>>& baseline, double confidence) {
    GapCurve out;
    out.step = step;
    std::vector<double> r(recipe.size()), b(baseline.size());
    for (std::size_t j = 0; j < step.size(); ++j) {
        for (std::size_t i = 0; i < r.size(); ++i) r[i] = j < recipe[i].size() ? recipe[i][j] : NAN;
        for (std::size_t i = 0; i < b.size(); ++i) b[i] = j < baseline[i].size() ? baseline[i][j] : NAN;
        out.at.push_back(paired_difference(r, b, confidence));
    }
    return out;
}

}  // namespace fp8scope::stats
