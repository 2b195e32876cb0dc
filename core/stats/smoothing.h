// Exponential moving average for noisy per-step series (a loss, a loss difference): the
// span N of pandas' ewm, alpha = 2 / (N + 1). NaN entries (steps without a value) stay NaN
// and do not reset the average; span 1 returns the series unchanged.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

namespace fp8scope::stats {

inline std::vector<double> ema(const std::vector<double>& v, int span) {
    const double alpha = 2.0 / (std::max(span, 1) + 1.0);
    std::vector<double> out(v.size(), NAN);
    double s = NAN;
    for (std::size_t i = 0; i < v.size(); ++i) {
        if (!std::isfinite(v[i])) continue;
        s = std::isfinite(s) ? s + alpha * (v[i] - s) : v[i];
        out[i] = s;
    }
    return out;
}

}  // namespace fp8scope::stats
