#include "fp8/analysis.h"

#include <bit>
#include <cmath>

namespace fp8scope {
namespace {
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr std::uint32_t kInfBits = 0x7F800000u;
}  // namespace

void finish_moments(const MomentTotals& m, std::int64_t numel, TensorStats& t) {
    t.numel = numel;
    t.nan = m.nan;
    t.inf = m.inf;
    t.finite = numel - m.nan - m.inf;
    t.histogram.nan = m.nan;
    t.histogram.inf = m.inf;
    t.amax = std::bit_cast<float>(m.amax_finite_bits);
    const double nf = static_cast<double>(t.finite);
    t.mean = t.finite ? m.sum / nf : kNaN;
    t.rms = t.finite ? std::sqrt(m.sum2 / nf) : kNaN;
}

void finish_central(const CentralTotals& c, double outlier_k, TensorStats& t) {
    const double nf = static_cast<double>(t.finite);
    t.zero = c.zero;
    t.histogram.zero = c.zero;
    t.min_nonzero_abs = c.min_nz_bits < kInfBits ? std::bit_cast<float>(c.min_nz_bits) : 0.0;
    t.dynamic_range = t.min_nonzero_abs > 0 ? std::log2(t.amax) - std::log2(t.min_nonzero_abs) : 0.0;
    t.stddev = t.finite ? std::sqrt(c.m2 / nf) : kNaN;
    t.outliers.kurtosis = (t.finite && c.m2 > 0) ? (c.m4 / nf) / ((c.m2 / nf) * (c.m2 / nf)) : kNaN;
    t.outliers.k = outlier_k;
    t.outliers.frac_beyond_k_rms = t.finite ? c.beyond / nf : kNaN;
}

ErrorStats finish_error(std::string recipe, float scaling_amax, const ErrorTotals& a, const TensorStats& t,
                        std::optional<float> per_tensor_scale_inv) {
    float si_min = a.scale_inv_min, si_max = a.scale_inv_max;
    if (per_tensor_scale_inv && t.numel > 0) si_min = si_max = *per_tensor_scale_inv;
    const std::int64_t used = t.finite - a.nonfinite_out;
    const std::int64_t nonzero = t.finite - t.zero;
    ErrorStats e;
    e.recipe = std::move(recipe);
    e.amax = scaling_amax;
    e.mse = used ? a.sdd / used : kNaN;
    e.sqnr_db = a.sxx == 0 ? kNaN
                : (a.sdd == 0 ? std::numeric_limits<double>::infinity() : 10 * std::log10(a.sxx / a.sdd));
    e.rel_l2 = a.sxx == 0 ? kNaN : std::sqrt(a.sdd / a.sxx);
    e.max_abs_err = used ? a.max_err : kNaN;
    e.cosine = (a.sxx == 0 || a.sqq == 0) ? kNaN : a.sxq / std::sqrt(a.sxx * a.sqq);
    e.underflow_pct = nonzero ? 100.0 * a.underflow / nonzero : kNaN;
    e.overflow_pct = t.numel ? 100.0 * a.overflow / t.numel : kNaN;
    e.scale_inv_min = si_min <= si_max ? si_min : kNaN;
    e.scale_inv_max = si_min <= si_max ? si_max : kNaN;
    e.nonfinite_out = a.nonfinite_out;
    return e;
}

}  // namespace fp8scope
