// The float64 reference (see reference.h): obvious loops, no vectorization, no threads.
#include "reference.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <variant>

namespace fp8scope::ref {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

double max_of(Format f) { return f == Format::E4M3 ? 448.0 : 57344.0; }

// s = fp8_max / max(amax, eps) in float32; 1 for amax NaN or a clamped amax of 0 or Inf;
// FLT_MAX when the quotient overflows; pow2 takes the largest power of two <= s.
float scale_from_amax(float amax, Format f, float eps, bool pow2) {
    if (std::isnan(amax)) return 1.0f;
    const float a = amax < eps ? eps : amax;
    if (a == 0.0f || std::isinf(a)) return 1.0f;
    float s = static_cast<float>(max_of(f)) / a;
    if (std::isinf(s)) s = FLT_MAX;
    if (pow2) {
        int e;
        std::frexp(s, &e);  // s = m * 2^e, m in [0.5, 1)
        s = std::ldexp(1.0f, e - 1);
    }
    return s;
}

int emax_of(Format f) { return f == Format::E4M3 ? 8 : 15; }

// MX exponent by the rules' text: floor(log2 amax) - emax, or the least e (searched)
// with amax <= fp8_max * 2^e; both within [-127, 127].
int mx_exponent_ref(float amax, Format f, MXRule rule) {
    if (amax == 0.0f) return -127;
    if (rule == MXRule::Floor) {
        int e;
        std::frexp(static_cast<double>(amax), &e);
        return std::clamp(e - 1 - emax_of(f), -127, 127);
    }
    for (int e = -127; e < 127; ++e) {
        if (static_cast<double>(amax) <= max_of(f) * std::ldexp(1.0, e)) return e;
    }
    return 127;
}

bool is_nonfinite(float v) { return std::isnan(v) || std::isinf(v); }

}  // namespace

Quantized quantize(MatrixView x, const Recipe& recipe, float delayed_scale) {
    Quantized q;
    q.format = recipe_format(recipe);  // FP8 only: the FP4 quantizers have their reference in test_fp4.cpp
    q.rows = x.rows;
    q.cols = x.cols;
    bool mx = false;
    float eps = 0.0f;
    bool pow2 = false;
    if (const auto* c = std::get_if<CurrentScaling>(&recipe)) {
        q.block_rows = x.rows;
        q.block_cols = x.cols;
        eps = c->eps;
        pow2 = c->pow2;
    } else if (std::holds_alternative<DelayedScaling>(recipe)) {
        q.block_rows = x.rows;
        q.block_cols = x.cols;
    } else if (const auto* b = std::get_if<BlockScaling>(&recipe)) {
        q.block_rows = b->block_rows;
        q.block_cols = b->block_cols;
        pow2 = b->pow2;
    } else {
        const auto& m = std::get<MXScaling>(recipe);
        q.block_rows = 1;
        q.block_cols = m.block;
        mx = true;
    }
    q.block_rows = std::max<std::int64_t>(1, q.block_rows);
    q.block_cols = std::max<std::int64_t>(1, q.block_cols);
    const std::int64_t srows = (x.rows + q.block_rows - 1) / q.block_rows;
    const std::int64_t scols = (x.cols + q.block_cols - 1) / q.block_cols;
    q.scale_inv.assign(srows * scols, 0.0f);
    if (mx) q.e8m0.assign(srows * scols, 0);
    q.codes.assign(x.size(), 0);
    q.dequantized.assign(x.size(), 0.0f);

    for (std::int64_t br = 0; br < srows; ++br) {
        for (std::int64_t bc = 0; bc < scols; ++bc) {
            const std::int64_t r0 = br * q.block_rows, r1 = std::min(x.rows, r0 + q.block_rows);
            const std::int64_t c0 = bc * q.block_cols, c1 = std::min(x.cols, c0 + q.block_cols);
            float amax = 0.0f;
            bool nonfinite = false;
            for (std::int64_t r = r0; r < r1; ++r) {
                for (std::int64_t c = c0; c < c1; ++c) {
                    const float v = x.data[r * x.cols + c];
                    nonfinite = nonfinite || is_nonfinite(v);
                    if (!std::isnan(v)) amax = std::max(amax, std::fabs(v));
                }
            }
            float s;
            if (std::holds_alternative<DelayedScaling>(recipe)) {
                s = delayed_scale;
            } else if (std::holds_alternative<CurrentScaling>(recipe)) {
                // One block: the amax above is the whole tensor's.
                s = scale_from_amax(amax, q.format, eps, pow2);
            } else if (!mx) {
                s = scale_from_amax(amax, q.format, 0.0f, pow2);
            } else if (nonfinite) {
                s = std::numeric_limits<float>::quiet_NaN();
            } else {
                s = std::ldexp(1.0f, -mx_exponent_ref(amax, q.format, std::get<MXScaling>(recipe).rule));
            }
            const float scale_inv = mx ? (nonfinite ? s : std::ldexp(1.0f, -std::ilogb(s))) : 1.0f / s;
            q.scale_inv[br * scols + bc] = scale_inv;
            if (mx) {
                q.e8m0[br * scols + bc] =
                    nonfinite ? kE8M0NaN : static_cast<std::uint8_t>(127 - std::ilogb(s));
            }
            for (std::int64_t r = r0; r < r1; ++r) {
                for (std::int64_t c = c0; c < c1; ++c) {
                    const std::int64_t i = r * x.cols + c;
                    if (mx && nonfinite) {
                        q.codes[i] = encode(q.format, std::numeric_limits<float>::quiet_NaN());
                        q.dequantized[i] = std::numeric_limits<float>::quiet_NaN();
                        continue;
                    }
                    const float y = x.data[i] * s;
                    q.codes[i] = encode(q.format, y, Overflow::Saturate);
                    q.dequantized[i] = decode(q.format, q.codes[i]) * scale_inv;
                    if (std::isfinite(x.data[i]) && !std::isnan(y) &&
                        !is_finite_code(q.format, encode(q.format, y, Overflow::NonSaturate)))
                        ++q.overflow;
                }
            }
        }
    }
    return q;
}

void Delayed::push(float amax) {
    history.push_back(amax);
    while (static_cast<int>(history.size()) > std::max(1, recipe.history)) history.pop_front();
    double amax_ref;
    if (recipe.algo == AmaxAlgo::MostRecent) {
        amax_ref = history.back();
    } else {
        amax_ref = 0;
        for (float h : history) {
            if (std::isnan(h)) { amax_ref = kNaN; break; }
            amax_ref = std::max(amax_ref, static_cast<double>(h));
        }
    }
    if (std::isnan(amax_ref) || std::isinf(amax_ref) || amax_ref == 0) return;
    float s = static_cast<float>(max_of(recipe.format)) / static_cast<float>(amax_ref);
    s = s / std::pow(2.0f, static_cast<float>(recipe.margin));
    if (std::isinf(s)) s = FLT_MAX;
    if (s == 0.0f) return;
    scale = s;
}

ErrorStats error_stats(MatrixView x, const Quantized& q) {
    ErrorStats e;
    const std::int64_t n = x.size();
    double amax = 0, sxx = 0, sdd = 0, sqq = 0, sxq = 0, max_err = 0;
    std::int64_t used = 0, nonzero = 0, underflow = 0, nonfinite_out = 0;
    for (std::int64_t i = 0; i < n; ++i) {
        const double v = x.data[i];
        if (!std::isnan(v)) amax = std::max(amax, std::fabs(v));
        if (!std::isfinite(v)) continue;
        const double d = q.dequantized[i];
        if (v != 0) {
            ++nonzero;
            if (decode(q.format, q.codes[i]) == 0.0f) ++underflow;
        }
        if (!std::isfinite(d)) {
            ++nonfinite_out;
            continue;
        }
        ++used;
        sxx += v * v;
        sdd += (d - v) * (d - v);
        sqq += d * d;
        sxq += v * d;
        max_err = std::max(max_err, std::fabs(d - v));
    }
    e.amax = amax;
    e.mse = used ? sdd / used : kNaN;
    e.sqnr_db = sxx == 0 ? kNaN : (sdd == 0 ? std::numeric_limits<double>::infinity() : 10 * std::log10(sxx / sdd));
    e.rel_l2 = sxx == 0 ? kNaN : std::sqrt(sdd / sxx);
    e.max_abs_err = used ? max_err : kNaN;
    e.cosine = (sxx == 0 || sqq == 0) ? kNaN : sxq / std::sqrt(sxx * sqq);
    e.underflow_pct = nonzero ? 100.0 * underflow / nonzero : kNaN;
    e.overflow_pct = n ? 100.0 * q.overflow / n : kNaN;
    e.scale_inv_min = kNaN;
    e.scale_inv_max = kNaN;
    for (float s : q.scale_inv) {
        if (std::isnan(s)) continue;
        e.scale_inv_min = std::isnan(e.scale_inv_min) ? s : std::min<double>(e.scale_inv_min, s);
        e.scale_inv_max = std::isnan(e.scale_inv_max) ? s : std::max<double>(e.scale_inv_max, s);
    }
    e.nonfinite_out = nonfinite_out;
    return e;
}

TensorStats tensor_stats(MatrixView x, double outlier_k, int top_k) {
    TensorStats t;
    const std::int64_t n = x.size();
    t.numel = n;
    double sum = 0, sum2 = 0, min_nz = 0;
    for (std::int64_t i = 0; i < n; ++i) {
        const float v = x.data[i];
        if (std::isnan(v)) { ++t.nan; ++t.histogram.nan; continue; }
        if (std::isinf(v)) { ++t.inf; ++t.histogram.inf; continue; }
        ++t.finite;
        const double a = std::fabs(static_cast<double>(v));
        if (a == 0) {
            ++t.zero;
            ++t.histogram.zero;
        } else {
            ++t.histogram.bins[std::ilogb(a) - kHistMinExp];  // exact: float32 subnormals are normal doubles
            min_nz = min_nz == 0 ? a : std::min(min_nz, a);
        }
        t.amax = std::max(t.amax, a);
        sum += v;
        sum2 += a * a;
    }
    t.min_nonzero_abs = min_nz;
    t.dynamic_range = min_nz > 0 ? std::log2(t.amax) - std::log2(min_nz) : 0.0;
    const double nf = static_cast<double>(t.finite);
    t.mean = t.finite ? sum / nf : kNaN;
    t.rms = t.finite ? std::sqrt(sum2 / nf) : kNaN;
    double m2 = 0, m4 = 0;
    std::int64_t beyond = 0;
    for (std::int64_t i = 0; i < n; ++i) {
        const double v = x.data[i];
        if (!std::isfinite(v)) continue;
        const double d = v - t.mean;
        m2 += d * d;
        m4 += d * d * d * d;
        if (std::fabs(v) > outlier_k * t.rms) ++beyond;
    }
    t.stddev = t.finite ? std::sqrt(m2 / nf) : kNaN;
    t.outliers.kurtosis = (t.finite && m2 > 0) ? (m4 / nf) / ((m2 / nf) * (m2 / nf)) : kNaN;
    t.outliers.k = outlier_k;
    t.outliers.frac_beyond_k_rms = t.finite ? beyond / nf : kNaN;
    t.outliers.channel_absmax.assign(x.cols, 0.0f);
    std::vector<std::int64_t> order;
    for (std::int64_t i = 0; i < n; ++i) {
        const float v = x.data[i];
        if (!std::isfinite(v)) continue;
        float& ch = t.outliers.channel_absmax[i % x.cols];
        ch = std::max(ch, std::fabs(v));
        order.push_back(i);
    }
    std::stable_sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t b) {
        return std::fabs(x.data[a]) > std::fabs(x.data[b]);
    });
    for (std::int64_t j = 0; j < std::min<std::int64_t>(top_k, order.size()); ++j) {
        t.outliers.top.push_back({x.data[order[j]], order[j] / x.cols, order[j] % x.cols});
    }
    return t;
}

const char* data_kind_name(DataKind k) {
    switch (k) {
        case DataKind::Gaussian: return "gaussian";
        case DataKind::OutlierColumns: return "outlier_columns";
        case DataKind::Tiny: return "tiny";
        case DataKind::MixedZeros: return "mixed_zeros";
        case DataKind::NonFinite: return "nonfinite";
    }
    return "?";
}

std::vector<float> make_data(DataKind kind, std::int64_t rows, std::int64_t cols, unsigned seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::uniform_int_distribution<int> coin(0, 99), exps(-20, 10);
    std::vector<float> x(rows * cols);
    for (std::int64_t i = 0; i < rows * cols; ++i) {
        float v = normal(rng);
        switch (kind) {
            case DataKind::Gaussian: break;
            case DataKind::OutlierColumns: if ((i % cols) % 7 == 3) v *= 100.0f; break;
            case DataKind::Tiny: v *= 1e-30f; break;
            case DataKind::MixedZeros: {
                const int c = coin(rng);
                v = c < 25 ? 0.0f : (c < 50 ? -0.0f : std::ldexp(v, exps(rng)));
                break;
            }
            case DataKind::NonFinite: {
                const int c = coin(rng);
                if (c == 0) v = std::numeric_limits<float>::quiet_NaN();
                else if (c == 1) v = std::numeric_limits<float>::infinity();
                else if (c == 2) v = -std::numeric_limits<float>::infinity();
                break;
            }
        }
        x[i] = v;
    }
    return x;
}

bool close(double a, double b, double rel) {
    if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
    if (std::isinf(a) || std::isinf(b)) return a == b;
    return std::fabs(a - b) <= rel * std::max(std::fabs(a), std::fabs(b));
}

}  // namespace fp8scope::ref
