// Pass 2's statistics of one value (the tile kernel, tiles.cu, and the
// statistics-only kernel, stats.cu): power sums of d = x 2^-dev_exp - pivot
// (Params) in float32 per thread (at most 64 terms), or float64 for tensors too small for
// a float32 scale, the count beyond the outlier threshold and, for recipes' bounds, the
// least nonzero |x|.
#pragma once

#include "cuda/analysis/kernels.cuh"

namespace fp8scope::cuda::an {

struct Sums {
    float f1 = 0, f2 = 0, f3 = 0, f4 = 0;
    double d1 = 0, d2 = 0, d3 = 0, d4 = 0;
    unsigned beyond = 0, min_nz1 = qk::kInfBits - 1u;  // min_nz1: the least nonzero |x| - 1 (bits)

    // The tile's figures once the block has added them up, smax its largest finite |x|.
    __device__ __forceinline__ TileStats tile(unsigned smax) const {
        return {double(f1) + d1, double(f2) + d2, double(f3) + d3, double(f4) + d4, beyond, min_nz1 + 1u, smax};
    }
};

// Params in registers: through a reference into global memory, the compiler would reload
// them for every value (shared-memory stores might alias them).
struct StatsParams {
    float dev_norm, pivot;
    double dev_norm_d;
    unsigned threshold;  // bits of threshold_f: >= 0 or NaN, compared as bits
    bool f32_sums;
};
__device__ __forceinline__ StatsParams stats_params(const Params& q) {
    return {q.dev_norm, q.pivot, q.dev_norm_d, __float_as_uint(q.threshold_f), q.dev_exp >= kMinDevExp};
}

// Whether the tile takes the statistics without checks: whole, of a tensor of finite
// values, with float32 sums.
__device__ __forceinline__ bool unchecked(const TileAt& at, const Params& q) {
    return at.nr == kTile && at.nc == kTile && q.all_finite && q.dev_exp >= kMinDevExp;
}

__device__ __forceinline__ float deviation(const StatsParams& p, float v) { return fmaf(v, p.dev_norm, -p.pivot); }

__device__ __forceinline__ void add_power_sums(Sums& s, float d) {
    const float dd = d * d;
    s.f1 += d;
    s.f2 += dd;
    s.f3 = fmaf(dd, d, s.f3);
    s.f4 = fmaf(dd, dd, s.f4);
}

// One value; returns its |x| bits (0 for NaN and Inf). kChecked: it may be NaN or Inf, or
// take the float64 sums; without it, no selects. kLeast: keep the least nonzero |x|.
template <bool kChecked, bool kLeast>
__device__ __forceinline__ unsigned add_value(Sums& s, const StatsParams& p, float v) {
    const unsigned a = __float_as_uint(v) & ~qk::kSignBit;
    if (!kChecked) {
        add_power_sums(s, deviation(p, v));
        s.beyond += (p.threshold - a) >> 31;  // a > threshold, both below 2^31
        if (kLeast) s.min_nz1 = min(s.min_nz1, a - 1u);
        return a;
    }
    const bool fin = a < qk::kInfBits;
    if (p.f32_sums) {
        add_power_sums(s, fin ? deviation(p, v) : 0.0f);
    } else {
        const double d = fin ? fma(double(v), p.dev_norm_d, -double(p.pivot)) : 0.0, dd = d * d;
        s.d1 += d;
        s.d2 += dd;
        s.d3 += dd * d;
        s.d4 += dd * dd;
    }
    s.beyond += fin & (a > p.threshold);
    if (kLeast) s.min_nz1 = min(s.min_nz1, fin ? a - 1u : ~0u);  // 0 wraps past everything
    return fin ? a : 0u;
}

}  // namespace fp8scope::cuda::an
