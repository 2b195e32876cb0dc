// The fused analysis: tensor statistics and the quantization error of every recipe in
// two passes over the data.
//   Pass 1 (flat chunks): scaling amax, sum and sum of squares, NaN/Inf counts; these fix
//     the per-tensor scales, the mean and the rms that pass 2 needs.
//   Pass 2 (tiles of P rows x W columns, threads over tiles): each tile is walked in
//     sub-tiles of P x SW (128 x 128 by default, so a 128x128 block and its source stay in
//     L1/L2); a sub-tile gets its block amaxes and its tensor statistics, then every recipe
//     casts it and accumulates its error sums. A sub-tile's sums are also one cell of
//     the tile maps (the block heatmaps), so those cost no pass of their own.
// Sums are kept in 16 float64 lanes per quantity so the loops vectorize; every tile keeps
// its own partial results and they are combined in tile order, so the figures do not
// depend on the thread count. No codes or dequantized copies are stored.
// GCC 12 warns falsely about uninitialized values inside the AVX-512 intrinsics.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include "cpu/analysis.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <mutex>
#include <numeric>
#include <variant>

#include "cpu/cast.h"
#include "cpu/quantize.h"
#include "util/parallel.h"


namespace fp8scope {
namespace {

// 16 float64 lanes per sum: one AVX-512 vector of floats, two of doubles. The portable
// path keeps the same lanes, so both give the same sums.
constexpr int kLanes = 16;
constexpr std::uint32_t kAbs = ~cast::kSignBit;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

inline std::uint32_t bits(float v) { return std::bit_cast<std::uint32_t>(v); }

// The kLanes values at x[i]; the last, short group is copied into `pad` behind NaNs,
// which every portable loop counts apart from the finite values.
[[maybe_unused]] inline const float* lanes_at(const float* x, std::int64_t i, std::int64_t n, float* pad) {
    if (n - i >= kLanes) return x + i;
    std::fill(pad, pad + kLanes, std::numeric_limits<float>::quiet_NaN());
    std::copy(x + i, x + n, pad);
    return pad;
}

// Sum of lanes in a fixed order.
inline double lane_sum(const double (&l)[kLanes]) {
    double s = 0;
    for (double v : l) s += v;
    return s;
}

#if defined(__AVX512F__)
// 16 floats from p, the lanes past `left` filled with NaN (which every kernel skips).
inline __m512 load16(const float* p, std::int64_t left, __mmask16& valid) {
    valid = left >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << left) - 1u);
    return _mm512_mask_loadu_ps(_mm512_set1_ps(std::numeric_limits<float>::quiet_NaN()), valid, p);
}
inline __m512d lo_pd(__m512 v) { return _mm512_cvtps_pd(_mm512_castps512_ps256(v)); }
inline __m512d hi_pd(__m512 v) {
    return _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
}
inline __m512i abs_bits(__m512 v) {
    return _mm512_and_si512(_mm512_castps_si512(v), _mm512_set1_epi32(static_cast<int>(kAbs)));
}
inline int popcount(__mmask16 m) { return std::popcount(static_cast<unsigned>(m)); }
#endif

// ---- Pass 1 -------------------------------------------------------------------------

struct Pass1 {
    double sum[kLanes] = {}, sum2[kLanes] = {};
    std::uint32_t amax = 0;  // scaling amax bits: NaN ignored, Inf included
    std::uint32_t amax_finite = 0;
    std::int64_t nan = 0, inf = 0;
};

void pass1_range(const float* x, std::int64_t n, Pass1& p) {
#if defined(__AVX512F__)
    __m512d sum0 = _mm512_loadu_pd(p.sum), sum1 = _mm512_loadu_pd(p.sum + 8);
    __m512d sq0 = _mm512_loadu_pd(p.sum2), sq1 = _mm512_loadu_pd(p.sum2 + 8);
    __m512i amax = _mm512_setzero_si512(), amax_fin = _mm512_setzero_si512();
    const __m512i inf = _mm512_set1_epi32(static_cast<int>(cast::kInfBits));
    std::int64_t nan = 0, infs = 0;
    for (std::int64_t i = 0; i < n; i += 16) {
        __mmask16 valid;
        const __m512 v = load16(x + i, n - i, valid);
        const __m512i a = abs_bits(v);
        const __mmask16 fin = _mm512_cmplt_epu32_mask(a, inf);
        const __mmask16 is_nan = _mm512_cmpgt_epu32_mask(a, inf);
        nan += popcount(is_nan & valid);
        infs += popcount(_mm512_cmpeq_epi32_mask(a, inf));
        amax = _mm512_max_epu32(amax, _mm512_maskz_mov_epi32(static_cast<__mmask16>(~is_nan), a));
        amax_fin = _mm512_max_epu32(amax_fin, _mm512_maskz_mov_epi32(fin, a));
        const __m512 vf = _mm512_maskz_mov_ps(fin, v);
        const __m512d d0 = lo_pd(vf), d1 = hi_pd(vf);
        sum0 = _mm512_add_pd(sum0, d0);
        sum1 = _mm512_add_pd(sum1, d1);
        sq0 = _mm512_add_pd(sq0, _mm512_mul_pd(d0, d0));
        sq1 = _mm512_add_pd(sq1, _mm512_mul_pd(d1, d1));
    }
    _mm512_storeu_pd(p.sum, sum0);
    _mm512_storeu_pd(p.sum + 8, sum1);
    _mm512_storeu_pd(p.sum2, sq0);
    _mm512_storeu_pd(p.sum2 + 8, sq1);
    p.amax = std::max(p.amax, static_cast<std::uint32_t>(_mm512_reduce_max_epu32(amax)));
    p.amax_finite = std::max(p.amax_finite, static_cast<std::uint32_t>(_mm512_reduce_max_epu32(amax_fin)));
    p.nan += nan;
    p.inf += infs;
#else
    double sum[kLanes] = {}, sum2[kLanes] = {};
    std::uint32_t amax[kLanes] = {}, amax_fin[kLanes] = {}, nan[kLanes] = {}, inf[kLanes] = {};
    alignas(64) float pad[kLanes];
    for (std::int64_t i = 0; i < n; i += kLanes) {
        const float* v = lanes_at(x, i, n, pad);
        for (int j = 0; j < kLanes; ++j) {
            const std::uint32_t a = bits(v[j]) & kAbs;
            const bool fin = a < cast::kInfBits;
            const double d = fin ? static_cast<double>(v[j]) : 0.0;
            sum[j] += d;
            sum2[j] += d * d;
            amax[j] = std::max(amax[j], a > cast::kInfBits ? 0u : a);
            amax_fin[j] = std::max(amax_fin[j], fin ? a : 0u);
            nan[j] += a > cast::kInfBits;
            inf[j] += a == cast::kInfBits;
        }
    }
    const std::int64_t padded = (kLanes - n % kLanes) % kLanes;
    for (int j = 0; j < kLanes; ++j) {
        p.sum[j] += sum[j];
        p.sum2[j] += sum2[j];
        p.amax = std::max(p.amax, amax[j]);
        p.amax_finite = std::max(p.amax_finite, amax_fin[j]);
        p.nan += nan[j];
        p.inf += inf[j];
    }
    p.nan -= padded;
#endif
}

// ---- Pass 2: tensor statistics of one row segment ------------------------------------

struct TopEntry {
    std::uint32_t abs_bits;
    std::int64_t index;  // row-major position
    float value;
};
// a ranks before b: larger |x|, then earlier position.
inline bool ranks_before(const TopEntry& a, const TopEntry& b) {
    return a.abs_bits != b.abs_bits ? a.abs_bits > b.abs_bits : a.index < b.index;
}

struct StatsAcc {
    double m2[kLanes] = {}, m4[kLanes] = {};
    std::int64_t beyond = 0, zero = 0;
    std::uint32_t min_nz = cast::kInfBits;  // bits of the least nonzero |x|; Inf: none
    std::array<std::int64_t, kHistBins> hist{};
    std::vector<TopEntry> top;  // heap: the entry ranking last on top
};

// Central moments, the count beyond the threshold and the least nonzero |x| of a
// segment; returns the largest finite |x| bits (for the top-k filter).
std::uint32_t moments_segment(const float* x, std::int64_t n, double mean, double threshold, StatsAcc& acc) {
#if defined(__AVX512F__)
    __m512d m2_0 = _mm512_loadu_pd(acc.m2), m2_1 = _mm512_loadu_pd(acc.m2 + 8);
    __m512d m4_0 = _mm512_loadu_pd(acc.m4), m4_1 = _mm512_loadu_pd(acc.m4 + 8);
    const __m512d vmean = _mm512_set1_pd(mean), vthr = _mm512_set1_pd(threshold);
    const __m512i inf = _mm512_set1_epi32(static_cast<int>(cast::kInfBits));
    __m512i min_nz = inf, seg_max = _mm512_setzero_si512();
    std::int64_t beyond = 0;
    for (std::int64_t i = 0; i < n; i += 16) {
        __mmask16 valid;
        const __m512 v = load16(x + i, n - i, valid);
        const __m512i a = abs_bits(v);
        const __mmask16 fin = _mm512_cmplt_epu32_mask(a, inf);
        const __mmask16 nz = fin & _mm512_test_epi32_mask(a, a);
        min_nz = _mm512_mask_min_epu32(min_nz, nz, min_nz, a);
        seg_max = _mm512_mask_max_epu32(seg_max, fin, seg_max, a);
        const __m512d x0 = lo_pd(v), x1 = hi_pd(v);
        const __mmask8 f0 = static_cast<__mmask8>(fin), f1 = static_cast<__mmask8>(fin >> 8);
        const __m512d d0 = _mm512_maskz_sub_pd(f0, x0, vmean), d1 = _mm512_maskz_sub_pd(f1, x1, vmean);
        const __m512d q0 = _mm512_mul_pd(d0, d0), q1 = _mm512_mul_pd(d1, d1);
        m2_0 = _mm512_add_pd(m2_0, q0);
        m2_1 = _mm512_add_pd(m2_1, q1);
        m4_0 = _mm512_add_pd(m4_0, _mm512_mul_pd(q0, q0));
        m4_1 = _mm512_add_pd(m4_1, _mm512_mul_pd(q1, q1));
        beyond += std::popcount(static_cast<unsigned>(_mm512_mask_cmp_pd_mask(f0, _mm512_abs_pd(x0), vthr, _CMP_GT_OQ)));
        beyond += std::popcount(static_cast<unsigned>(_mm512_mask_cmp_pd_mask(f1, _mm512_abs_pd(x1), vthr, _CMP_GT_OQ)));
    }
    _mm512_storeu_pd(acc.m2, m2_0);
    _mm512_storeu_pd(acc.m2 + 8, m2_1);
    _mm512_storeu_pd(acc.m4, m4_0);
    _mm512_storeu_pd(acc.m4 + 8, m4_1);
    acc.beyond += beyond;
    acc.min_nz = std::min(acc.min_nz, static_cast<std::uint32_t>(_mm512_reduce_min_epu32(min_nz)));
    return static_cast<std::uint32_t>(_mm512_reduce_max_epu32(seg_max));
#else
    double m2[kLanes] = {}, m4[kLanes] = {};
    std::uint32_t beyond[kLanes] = {}, min_nz[kLanes], seg_max[kLanes] = {};
    std::fill(min_nz, min_nz + kLanes, cast::kInfBits);
    alignas(64) float pad[kLanes];
    for (std::int64_t i = 0; i < n; i += kLanes) {
        const float* v = lanes_at(x, i, n, pad);
        for (int j = 0; j < kLanes; ++j) {
            const std::uint32_t a = bits(v[j]) & kAbs;
            const bool fin = a < cast::kInfBits;
            const double xd = fin ? static_cast<double>(v[j]) : 0.0;
            const double d = fin ? xd - mean : 0.0;
            const double d2 = d * d;
            m2[j] += d2;
            m4[j] += d2 * d2;
            beyond[j] += fin && std::fabs(xd) > threshold;
            min_nz[j] = std::min(min_nz[j], a == 0 ? cast::kInfBits : (fin ? a : cast::kInfBits));
            seg_max[j] = std::max(seg_max[j], fin ? a : 0u);
        }
    }
    std::uint32_t smax = 0;
    for (int j = 0; j < kLanes; ++j) {
        acc.m2[j] += m2[j];
        acc.m4[j] += m4[j];
        acc.beyond += beyond[j];
        acc.min_nz = std::min(acc.min_nz, min_nz[j]);
        smax = std::max(smax, seg_max[j]);
    }
    return smax;
#endif
}

// Returns the bits of the segment's largest finite |x|.
std::uint32_t stats_segment(const float* x, std::int64_t n, std::int64_t index0, double mean, double threshold,
                            int top_k, StatsAcc& acc, std::uint32_t* channel_amax) {
    const std::uint32_t smax = moments_segment(x, n, mean, threshold, acc);
    for (std::int64_t i = 0; i < n; ++i) {
        const std::uint32_t a = bits(x[i]) & kAbs;
        channel_amax[i] = std::max(channel_amax[i], a < cast::kInfBits ? a : 0u);
    }
    // floor(log2|x|): the float32 exponent field, or the leading one of a subnormal.
    for (std::int64_t i = 0; i < n; ++i) {
        const std::uint32_t a = bits(x[i]) & kAbs;
        const std::uint32_t e = a >> 23;
        if (e - 1u < 254u) {
            ++acc.hist[e - 127 - kHistMinExp];
        } else if (a == 0) {
            ++acc.zero;
        } else if (e == 0) {
            ++acc.hist[(31 - std::countl_zero(a)) - 149 - kHistMinExp];
        }
    }
    // Top-k: only segments that can reach the heap are scanned.
    if (top_k <= 0) return smax;
    auto worse = [](const TopEntry& a, const TopEntry& b) { return ranks_before(a, b); };
    if (static_cast<int>(acc.top.size()) == top_k && smax < acc.top.front().abs_bits) return smax;
    for (std::int64_t i = 0; i < n; ++i) {
        const std::uint32_t a = bits(x[i]) & kAbs;
        if (a >= cast::kInfBits) continue;
        const TopEntry e{a, index0 + i, x[i]};
        if (static_cast<int>(acc.top.size()) < top_k) {
            acc.top.push_back(e);
            std::push_heap(acc.top.begin(), acc.top.end(), worse);
        } else if (ranks_before(e, acc.top.front())) {
            std::pop_heap(acc.top.begin(), acc.top.end(), worse);
            acc.top.back() = e;
            std::push_heap(acc.top.begin(), acc.top.end(), worse);
        }
    }
    return smax;
}

// ---- Pass 2: error sums of one recipe over one block segment -------------------------

struct ErrAcc {
    double sxx[kLanes] = {}, sdd[kLanes] = {}, sqq[kLanes] = {}, sxq[kLanes] = {}, max_err[kLanes] = {};
    std::int64_t underflow = 0, overflow = 0, nonfinite_out = 0;
    float scale_inv_min = std::numeric_limits<float>::infinity();
    float scale_inv_max = -std::numeric_limits<float>::infinity();
    void note_scale_inv(float si) {
        if (std::isnan(si)) return;
        scale_inv_min = std::min(scale_inv_min, si);
        scale_inv_max = std::max(scale_inv_max, si);
    }
    void add(const ErrAcc& o) {
        for (int j = 0; j < kLanes; ++j) {
            sxx[j] += o.sxx[j];
            sdd[j] += o.sdd[j];
            sqq[j] += o.sqq[j];
            sxq[j] += o.sxq[j];
            max_err[j] = std::max(max_err[j], o.max_err[j]);
        }
        underflow += o.underflow;
        overflow += o.overflow;
        nonfinite_out += o.nonfinite_out;
        scale_inv_min = std::min(scale_inv_min, o.scale_inv_min);
        scale_inv_max = std::max(scale_inv_max, o.scale_inv_max);
    }
};

// x' = round_sat(x * s) * scale_inv; sums over finite x with finite x'.
template <Format F>
void error_segment(const float* x, std::int64_t n, float s, float scale_inv, ErrAcc& acc) {
#if defined(__AVX512F__)
    __m512d sxx0 = _mm512_loadu_pd(acc.sxx), sxx1 = _mm512_loadu_pd(acc.sxx + 8);
    __m512d sdd0 = _mm512_loadu_pd(acc.sdd), sdd1 = _mm512_loadu_pd(acc.sdd + 8);
    __m512d sqq0 = _mm512_loadu_pd(acc.sqq), sqq1 = _mm512_loadu_pd(acc.sqq + 8);
    __m512d sxq0 = _mm512_loadu_pd(acc.sxq), sxq1 = _mm512_loadu_pd(acc.sxq + 8);
    __m512d me0 = _mm512_loadu_pd(acc.max_err), me1 = _mm512_loadu_pd(acc.max_err + 8);
    const __m512 vs = _mm512_set1_ps(s), vsi = _mm512_set1_ps(scale_inv);
    const __m512i inf = _mm512_set1_epi32(static_cast<int>(cast::kInfBits));
    std::int64_t under = 0, over = 0, nonfinite = 0;
    for (std::int64_t i = 0; i < n; i += 16) {
        __mmask16 valid;
        const __m512 v = load16(x + i, n - i, valid);
        const __m512i a = abs_bits(v);
        const __mmask16 fin = _mm512_cmplt_epu32_mask(a, inf);
        __mmask16 clamped;
        const __m512 r = cast::round_sat16<F>(_mm512_mul_ps(v, vs), clamped);
        const __m512 q = _mm512_mul_ps(r, vsi);
        const __mmask16 q_fin = _mm512_cmplt_epu32_mask(abs_bits(q), inf);
        const __mmask16 use = fin & q_fin;
        under += popcount(fin & _mm512_test_epi32_mask(a, a) & ~_mm512_test_epi32_mask(abs_bits(r), abs_bits(r)));
        over += popcount(fin & clamped);
        nonfinite += popcount(fin & ~q_fin);
        const __mmask8 u0 = static_cast<__mmask8>(use), u1 = static_cast<__mmask8>(use >> 8);
        const __m512d x0 = _mm512_maskz_mov_pd(u0, lo_pd(v)), x1 = _mm512_maskz_mov_pd(u1, hi_pd(v));
        const __m512d q0 = _mm512_maskz_mov_pd(u0, lo_pd(q)), q1 = _mm512_maskz_mov_pd(u1, hi_pd(q));
        const __m512d d0 = _mm512_sub_pd(q0, x0), d1 = _mm512_sub_pd(q1, x1);
        sxx0 = _mm512_add_pd(sxx0, _mm512_mul_pd(x0, x0));
        sxx1 = _mm512_add_pd(sxx1, _mm512_mul_pd(x1, x1));
        sdd0 = _mm512_add_pd(sdd0, _mm512_mul_pd(d0, d0));
        sdd1 = _mm512_add_pd(sdd1, _mm512_mul_pd(d1, d1));
        sqq0 = _mm512_add_pd(sqq0, _mm512_mul_pd(q0, q0));
        sqq1 = _mm512_add_pd(sqq1, _mm512_mul_pd(q1, q1));
        sxq0 = _mm512_add_pd(sxq0, _mm512_mul_pd(x0, q0));
        sxq1 = _mm512_add_pd(sxq1, _mm512_mul_pd(x1, q1));
        me0 = _mm512_max_pd(me0, _mm512_abs_pd(d0));
        me1 = _mm512_max_pd(me1, _mm512_abs_pd(d1));
    }
    _mm512_storeu_pd(acc.sxx, sxx0);
    _mm512_storeu_pd(acc.sxx + 8, sxx1);
    _mm512_storeu_pd(acc.sdd, sdd0);
    _mm512_storeu_pd(acc.sdd + 8, sdd1);
    _mm512_storeu_pd(acc.sqq, sqq0);
    _mm512_storeu_pd(acc.sqq + 8, sqq1);
    _mm512_storeu_pd(acc.sxq, sxq0);
    _mm512_storeu_pd(acc.sxq + 8, sxq1);
    _mm512_storeu_pd(acc.max_err, me0);
    _mm512_storeu_pd(acc.max_err + 8, me1);
    acc.underflow += under;
    acc.overflow += over;
    acc.nonfinite_out += nonfinite;
#else
    double sxx[kLanes], sdd[kLanes], sqq[kLanes], sxq[kLanes], max_err[kLanes];
    std::copy(acc.sxx, acc.sxx + kLanes, sxx);
    std::copy(acc.sdd, acc.sdd + kLanes, sdd);
    std::copy(acc.sqq, acc.sqq + kLanes, sqq);
    std::copy(acc.sxq, acc.sxq + kLanes, sxq);
    std::copy(acc.max_err, acc.max_err + kLanes, max_err);
    std::uint32_t under[kLanes] = {}, over[kLanes] = {}, nonfinite[kLanes] = {};
    alignas(64) float pad[kLanes];
    for (std::int64_t i = 0; i < n; i += kLanes) {
        const float* v = lanes_at(x, i, n, pad);
        for (int j = 0; j < kLanes; ++j) {
            const std::uint32_t a = bits(v[j]) & kAbs;
            const bool fin = a < cast::kInfBits;
            std::uint32_t o;
            const float r = cast::round_sat<F>(v[j] * s, o);
            const float q = r * scale_inv;
            const bool q_fin = (bits(q) & kAbs) < cast::kInfBits;
            const bool use = fin && q_fin;
            const double xd = use ? static_cast<double>(v[j]) : 0.0;
            const double qd = use ? static_cast<double>(q) : 0.0;
            const double d = qd - xd;
            sxx[j] += xd * xd;
            sdd[j] += d * d;
            sqq[j] += qd * qd;
            sxq[j] += xd * qd;
            max_err[j] = std::max(max_err[j], std::fabs(d));
            under[j] += fin && a != 0 && r == 0.0f;
            over[j] += fin ? o : 0u;
            nonfinite[j] += fin && !q_fin;
        }
    }
    std::copy(sxx, sxx + kLanes, acc.sxx);
    std::copy(sdd, sdd + kLanes, acc.sdd);
    std::copy(sqq, sqq + kLanes, acc.sqq);
    std::copy(sxq, sxq + kLanes, acc.sxq);
    std::copy(max_err, max_err + kLanes, acc.max_err);
    for (int j = 0; j < kLanes; ++j) {
        acc.underflow += under[j];
        acc.overflow += over[j];
        acc.nonfinite_out += nonfinite[j];
    }
#endif
}

using ErrorKernel = void (*)(const float*, std::int64_t, float, float, ErrAcc&);

std::int64_t count_finite(const float* x, std::int64_t n) {
    std::int64_t c = 0;
    for (std::int64_t i = 0; i < n; ++i) c += (bits(x[i]) & kAbs) < cast::kInfBits;
    return c;
}

// What pass 2 needs to know of one recipe.
struct RecipePlan {
    ErrorKernel kernel = nullptr;
    bool per_tensor = false, mx = false, pow2 = false;
    Format format = Format::E4M3;
    MXRule rule = MXRule::RCeil;
    std::int64_t block_rows = 1, block_cols = 1;
    float s = 1, scale_inv = 1;  // per-tensor recipes
};

RecipePlan plan_recipe(const Recipe& r, float amax, float delayed_scale) {
    RecipePlan p;
    p.format = recipe_format(r);
    p.kernel = p.format == Format::E4M3 ? &error_segment<Format::E4M3> : &error_segment<Format::E5M2>;
    if (const auto* c = std::get_if<CurrentScaling>(&r)) {
        p.per_tensor = true;
        p.s = compute_scale(amax, c->format, c->eps, c->pow2);
    } else if (std::holds_alternative<DelayedScaling>(r)) {
        p.per_tensor = true;  // without its history's scale, a lone tensor is a first step: s = 1
        p.s = std::isnan(delayed_scale) ? 1.0f : delayed_scale;
    } else if (const auto* b = std::get_if<BlockScaling>(&r)) {
        if (b->block_rows < 1 || b->block_cols < 1)
            throw std::invalid_argument("recipe " + recipe_name(r) + ": block shape must be positive");
        p.block_rows = b->block_rows;
        p.block_cols = b->block_cols;
        p.pow2 = b->pow2;
    } else {
        const auto& m = std::get<MXScaling>(r);
        if (m.block < 1) throw std::invalid_argument("recipe " + recipe_name(r) + ": block must be positive");
        p.mx = true;
        p.rule = m.rule;
        p.block_cols = m.block;
    }
    p.scale_inv = 1.0f / p.s;
    return p;
}

// Tiling of pass 2. Tiles hold whole blocks of every recipe; the default 128 x 2048 with
// 128-column sub-tiles depends only on the recipes' block shapes, never on threads.
struct Tiling {
    std::int64_t P = 128, SW = 128, W = 2048;
    std::int64_t panels = 0, chunks = 0;
};

Tiling make_tiling(MatrixView x, const std::vector<RecipePlan>& plans) {
    Tiling t;
    for (const RecipePlan& p : plans) {
        if (p.per_tensor) continue;
        t.P = std::lcm(t.P, p.block_rows);
        t.SW = std::lcm(t.SW, p.block_cols);
    }
    t.W = t.SW * std::max<std::int64_t>(1, 2048 / t.SW);
    t.panels = (x.rows + t.P - 1) / t.P;
    t.chunks = (x.cols + t.W - 1) / t.W;
    return t;
}

struct TileResult {
    StatsAcc stats;
    std::vector<ErrAcc> errors;
};

// Every recipe over one P x (c1 - c0) sub-tile whose first row is r0.
void errors_subtile(MatrixView x, std::int64_t r0, std::int64_t r1, std::int64_t c0, std::int64_t c1,
                    const std::vector<RecipePlan>& plans, std::vector<ErrAcc>& errors,
                    std::vector<std::uint32_t>& amax, std::vector<std::uint8_t>& nonfinite) {
    for (std::size_t k = 0; k < plans.size(); ++k) {
        const RecipePlan& p = plans[k];
        ErrAcc& acc = errors[k];
        if (p.per_tensor) {
            for (std::int64_t r = r0; r < r1; ++r) p.kernel(x.row(r) + c0, c1 - c0, p.s, p.scale_inv, acc);
            continue;
        }
        const std::int64_t segs = (c1 - c0 + p.block_cols - 1) / p.block_cols;
        for (std::int64_t g0 = r0; g0 < r1; g0 += p.block_rows) {
            const std::int64_t g1 = std::min(r1, g0 + p.block_rows);
            // Block amaxes of this row group (one row for 1xN blocks and MX).
            amax.assign(segs, 0);
            nonfinite.assign(segs, 0);
            for (std::int64_t r = g0; r < g1; ++r) {
                for (std::int64_t b = 0; b < segs; ++b) {
                    const std::int64_t s0 = c0 + b * p.block_cols, s1 = std::min(c1, s0 + p.block_cols);
                    bool nf;
                    const std::uint32_t m = cast::amax_bits(x.row(r) + s0, s1 - s0, nf);
                    amax[b] = std::max(amax[b], m);
                    nonfinite[b] |= nf;
                }
            }
            for (std::int64_t b = 0; b < segs; ++b) {
                const std::int64_t s0 = c0 + b * p.block_cols, s1 = std::min(c1, s0 + p.block_cols);
                const float a = std::bit_cast<float>(amax[b]);
                float s, si;
                if (!p.mx) {
                    s = compute_scale(a, p.format, 0.0f, p.pow2);
                    si = 1.0f / s;
                } else if (nonfinite[b]) {  // NaN scale: every element of the block is NaN
                    acc.nonfinite_out += count_finite(x.row(g0) + s0, s1 - s0);
                    continue;
                } else {
                    const int e = mx_exponent(a, p.format, p.rule);
                    s = cast::pow2(-e);
                    si = cast::pow2(e);
                }
                acc.note_scale_inv(si);
                for (std::int64_t r = g0; r < g1; ++r) p.kernel(x.row(r) + s0, s1 - s0, s, si, acc);
            }
        }
    }
}

void init_maps(TileMaps& maps, MatrixView x, const Tiling& t, std::size_t recipes) {
    maps.tile_rows = static_cast<int>(std::min(t.P, std::max<std::int64_t>(x.rows, 1)));
    maps.tile_cols = static_cast<int>(std::min(t.SW, std::max<std::int64_t>(x.cols, 1)));
    maps.grid_rows = static_cast<int>(t.panels);
    maps.grid_cols = static_cast<int>((x.cols + t.SW - 1) / t.SW);
    const std::size_t cells = static_cast<std::size_t>(maps.grid_rows) * maps.grid_cols;
    maps.absmax.assign(cells, 0.0f);
    maps.recipes.resize(recipes);
    for (TileMap& m : maps.recipes) {
        m.scale_inv.assign(cells, std::numeric_limits<float>::quiet_NaN());
        m.signal.assign(cells, 0.0);
        m.error.assign(cells, 0.0);
    }
}

// One cell of every map from its sub-tile's sums (each cell has one writer).
void fill_cell(TileMaps& maps, std::int64_t cell, std::uint32_t absmax_bits, const std::vector<RecipePlan>& plans,
               const std::vector<ErrAcc>& sub) {
    maps.absmax[cell] = std::bit_cast<float>(absmax_bits);
    for (std::size_t k = 0; k < plans.size(); ++k) {
        TileMap& m = maps.recipes[k];
        const ErrAcc& a = sub[k];
        m.scale_inv[cell] = plans[k].per_tensor ? plans[k].scale_inv
                            : a.scale_inv_min <= a.scale_inv_max ? a.scale_inv_max
                                                                 : std::numeric_limits<float>::quiet_NaN();
        m.signal[cell] = lane_sum(a.sxx);
        m.error[cell] = lane_sum(a.sdd);
    }
}

}  // namespace

Analysis analyze(MatrixView x, const std::vector<Recipe>& recipes, const StatsOptions& opt,
                 const AnalysisExtras& extras) {
    Analysis out;
    TensorStats& t = out.tensor;
    const std::int64_t n = x.size();
    t.numel = n;
    ThreadPool& pool = ThreadPool::shared(opt.threads);

    // Pass 1 over fixed flat chunks.
    constexpr std::int64_t kChunk = 1 << 18;
    const std::int64_t chunks1 = (n + kChunk - 1) / kChunk;
    std::vector<Pass1> p1(chunks1);
    pool.run(chunks1, [&](std::int64_t c) {
        const std::int64_t i0 = c * kChunk, i1 = std::min(n, i0 + kChunk);
        pass1_range(x.data + i0, i1 - i0, p1[c]);
    });
    double sum = 0, sum2 = 0;
    std::uint32_t amax_bits = 0, amax_finite_bits = 0;
    for (const Pass1& p : p1) {
        sum += lane_sum(p.sum);
        sum2 += lane_sum(p.sum2);
        amax_bits = std::max(amax_bits, p.amax);
        amax_finite_bits = std::max(amax_finite_bits, p.amax_finite);
        t.nan += p.nan;
        t.inf += p.inf;
    }
    t.finite = n - t.nan - t.inf;
    t.histogram.nan = t.nan;
    t.histogram.inf = t.inf;
    t.amax = std::bit_cast<float>(amax_finite_bits);
    const double nf = static_cast<double>(t.finite);
    t.mean = t.finite ? sum / nf : kNaN;
    t.rms = t.finite ? std::sqrt(sum2 / nf) : kNaN;
    const double threshold = opt.outlier_k * t.rms;
    const float scaling_amax = out.scaling_amax = std::bit_cast<float>(amax_bits);

    std::vector<RecipePlan> plans;
    for (std::size_t k = 0; k < recipes.size(); ++k) {
        const float delayed = k < extras.delayed_scales.size() ? extras.delayed_scales[k] : kNaN;
        plans.push_back(plan_recipe(recipes[k], scaling_amax, delayed));
    }
    const Tiling tiling = make_tiling(x, plans);
    TileMaps& maps = out.maps;
    if (extras.tile_maps) init_maps(maps, x, tiling, plans.size());

    // Pass 2 over tiles.
    const std::int64_t tiles = tiling.panels * tiling.chunks;
    std::vector<TileResult> results(tiles);
    std::vector<std::uint32_t> channel(x.cols, 0);
    std::mutex channel_mu;
    const double mean = t.finite ? t.mean : 0.0;
    pool.run(tiles, [&](std::int64_t tile) {
        const std::int64_t r0 = (tile / tiling.chunks) * tiling.P, r1 = std::min(x.rows, r0 + tiling.P);
        const std::int64_t w0 = (tile % tiling.chunks) * tiling.W, w1 = std::min(x.cols, w0 + tiling.W);
        TileResult& res = results[tile];
        res.errors.resize(plans.size());
        std::vector<std::uint32_t> ch(w1 - w0, 0), amax;
        std::vector<std::uint8_t> nonfinite;
        std::vector<ErrAcc> sub(plans.size());  // per sub-tile: a cell of the tile maps
        for (std::int64_t c0 = w0; c0 < w1; c0 += tiling.SW) {
            const std::int64_t c1 = std::min(w1, c0 + tiling.SW);
            std::uint32_t sub_max = 0;
            for (std::int64_t r = r0; r < r1; ++r) {
                sub_max = std::max(sub_max, stats_segment(x.row(r) + c0, c1 - c0, r * x.cols + c0, mean, threshold,
                                                          opt.top_k, res.stats, ch.data() + (c0 - w0)));
            }
            std::fill(sub.begin(), sub.end(), ErrAcc{});
            errors_subtile(x, r0, r1, c0, c1, plans, sub, amax, nonfinite);
            for (std::size_t k = 0; k < plans.size(); ++k) res.errors[k].add(sub[k]);
            if (extras.tile_maps) {
                fill_cell(maps, (r0 / tiling.P) * maps.grid_cols + c0 / tiling.SW, sub_max, plans, sub);
            }
        }
        std::lock_guard lock(channel_mu);
        for (std::int64_t c = w0; c < w1; ++c) channel[c] = std::max(channel[c], ch[c - w0]);
    });

    // Combine in tile order.
    double m2 = 0, m4 = 0;
    std::int64_t beyond = 0;
    std::uint32_t min_nz = cast::kInfBits;
    std::vector<TopEntry> top;
    for (const TileResult& r : results) {
        m2 += lane_sum(r.stats.m2);
        m4 += lane_sum(r.stats.m4);
        beyond += r.stats.beyond;
        t.zero += r.stats.zero;
        min_nz = std::min(min_nz, r.stats.min_nz);
        for (int b = 0; b < kHistBins; ++b) t.histogram.bins[b] += r.stats.hist[b];
        top.insert(top.end(), r.stats.top.begin(), r.stats.top.end());
    }
    t.histogram.zero = t.zero;
    t.min_nonzero_abs = min_nz < cast::kInfBits ? std::bit_cast<float>(min_nz) : 0.0;
    t.dynamic_range = t.min_nonzero_abs > 0 ? std::log2(t.amax) - std::log2(t.min_nonzero_abs) : 0.0;
    t.stddev = t.finite ? std::sqrt(m2 / nf) : kNaN;
    t.outliers.kurtosis = (t.finite && m2 > 0) ? (m4 / nf) / ((m2 / nf) * (m2 / nf)) : kNaN;
    t.outliers.k = opt.outlier_k;
    t.outliers.frac_beyond_k_rms = t.finite ? beyond / nf : kNaN;
    t.outliers.channel_absmax.resize(x.cols);
    for (std::int64_t c = 0; c < x.cols; ++c) t.outliers.channel_absmax[c] = std::bit_cast<float>(channel[c]);
    std::sort(top.begin(), top.end(), ranks_before);
    if (static_cast<int>(top.size()) > std::max(0, opt.top_k)) top.resize(std::max(0, opt.top_k));
    for (const TopEntry& e : top) t.outliers.top.push_back({e.value, e.index / x.cols, e.index % x.cols});

    std::int64_t nonzero = t.finite - t.zero;
    for (std::size_t k = 0; k < plans.size(); ++k) {
        double sxx = 0, sdd = 0, sqq = 0, sxq = 0, max_err = 0;
        std::int64_t underflow = 0, overflow = 0, nonfinite_out = 0;
        float si_min = std::numeric_limits<float>::infinity(), si_max = -si_min;
        for (const TileResult& r : results) {
            const ErrAcc& a = r.errors[k];
            sxx += lane_sum(a.sxx);
            sdd += lane_sum(a.sdd);
            sqq += lane_sum(a.sqq);
            sxq += lane_sum(a.sxq);
            for (double m : a.max_err) max_err = std::max(max_err, m);
            underflow += a.underflow;
            overflow += a.overflow;
            nonfinite_out += a.nonfinite_out;
            si_min = std::min(si_min, a.scale_inv_min);
            si_max = std::max(si_max, a.scale_inv_max);
        }
        const RecipePlan& p = plans[k];
        if (p.per_tensor && n > 0) si_min = si_max = p.scale_inv;
        const std::int64_t used = t.finite - nonfinite_out;
        ErrorStats e;
        e.recipe = recipe_name(recipes[k]);
        e.amax = scaling_amax;
        e.mse = used ? sdd / used : kNaN;
        e.sqnr_db = sxx == 0 ? kNaN : (sdd == 0 ? std::numeric_limits<double>::infinity() : 10 * std::log10(sxx / sdd));
        e.rel_l2 = sxx == 0 ? kNaN : std::sqrt(sdd / sxx);
        e.max_abs_err = used ? max_err : kNaN;
        e.cosine = (sxx == 0 || sqq == 0) ? kNaN : sxq / std::sqrt(sxx * sqq);
        e.underflow_pct = nonzero ? 100.0 * underflow / nonzero : kNaN;
        e.overflow_pct = n ? 100.0 * overflow / n : kNaN;
        e.scale_inv_min = si_min <= si_max ? si_min : kNaN;
        e.scale_inv_max = si_min <= si_max ? si_max : kNaN;
        e.nonfinite_out = nonfinite_out;
        out.errors.push_back(std::move(e));
    }
    return out;
}

}  // namespace fp8scope
