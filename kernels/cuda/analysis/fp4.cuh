// FP4 quantizers in pass 2 of the device analysis (tiles.cu): the error sums of NVFP4
// (1x16 blocks, 16x16 tiles) and MXFP4 (1x32) over a 128 x 128 tile in shared memory, by
// cast_rules.h's rules as the CPU's kernels/cpu/fp4.cpp applies them: the same block
// amaxes, scales, codes and counts; sums in float64 (their order differs from the CPU's).
// With rht each full 16-run of a row is transformed (cast::rht16) first and the figures
// are of the transformed values; with sr the bits are rounding_bits({}, e), e the element's
// row-major index in the view.
#pragma once

#include "cuda/analysis/kernels.cuh"

namespace fp8scope::cuda::an {

struct Fp4Acc {
    double sxx = 0, sdd = 0, sqq = 0, sxq = 0;
    float max_err = 0, si_min = INFINITY, si_max = -INFINITY;
    unsigned under = 0, over = 0, nonfinite = 0;
};

// The values of one block row segment (kB elements from column c of tile row r), zeros
// past nc, transformed when the plan has rht; returns the largest |x| bits (NaN above Inf).
template <int kB, class T, int kRow>
__device__ __forceinline__ unsigned fp4_segment(const RecipePlan& p, const T* tile, int r, int c, int nc, float (&v)[kB]) {
    unsigned raw = 0;
#pragma unroll
    for (int j = 0; j < kB; ++j) v[j] = c + j < nc ? as_float(tile[r * kRow + c + j]) : 0.0f;
    if (p.rht)
#pragma unroll
        for (int h = 0; h < kB / 16; ++h)
            if (c + 16 * h + 16 <= nc) cast::rht16(v + 16 * h);
#pragma unroll
    for (int j = 0; j < kB; ++j) raw = max(raw, __float_as_uint(v[j]) & ~qk::kSignBit);
    return raw;
}

// `tile`: the tile in shared memory (row stride kRow); `blk_raw`: shared room for the 64
// block amaxes of 16x16 tiles.
template <int kB, class T, int kRow>
__device__ void fp4_errors(const RecipePlan& p, float s_enc, float s_dec, const TileInput& in, const TileAt& at,
                           const T* tile, unsigned* blk_raw, Fp4Acc& e) {
    constexpr int kSegs = kTile / kB;
    const bool two_d = p.block_rows_log2 == 4;
    float v[kB];
    if (two_d) {  // 16x16 tiles: the block amax over its 16 row segments first
        for (int b = threadIdx.x; b < (kTile / 16) * kSegs; b += blockDim.x) blk_raw[b] = 0u;
        __syncthreads();
        for (int u = threadIdx.x; u < kTile * kSegs; u += blockDim.x) {
            const int r = u % kTile, c = (u / kTile) * kB;
            if (r >= at.nr || c >= at.nc) continue;
            const unsigned raw = fp4_segment<kB, T, kRow>(p, tile, r, c, at.nc, v);
            if (raw) atomicMax(&blk_raw[(r >> 4) * kSegs + c / kB], raw);
        }
        __syncthreads();
    }
    // Consecutive threads take consecutive rows of one block column.
    for (int u = threadIdx.x; u < kTile * kSegs; u += blockDim.x) {
        const int r = u % kTile, c = (u / kTile) * kB;
        if (r >= at.nr || c >= at.nc) continue;
        unsigned raw = fp4_segment<kB, T, kRow>(p, tile, r, c, at.nc, v);
        if (two_d) raw = blk_raw[(r >> 4) * kSegs + c / kB];
        // A block holding NaN or Inf: its scale is NaN (every x' NaN).
        const unsigned amax = raw >= qk::kInfBits ? qk::kInfBits : raw;
        const cast::FP4BlockScale b =
            p.fp4_nv ? cast::nvfp4_block_scale(amax, s_enc, s_dec) : cast::mxfp4_block_scale(amax, p.rule);
        const int n = at.nc - c < kB ? at.nc - c : kB;
        if (qk::is_nan(b.scale)) {
            for (int j = 0; j < n; ++j) e.nonfinite += (__float_as_uint(v[j]) & ~qk::kSignBit) < qk::kInfBits;
            continue;
        }
        const float si = __fmul_rn(b.scale, b.dec);
        e.si_min = fminf(e.si_min, si);
        e.si_max = fmaxf(e.si_max, si);
        const std::uint64_t e0 = std::uint64_t(at.r0 + r) * std::uint64_t(in.cols) + std::uint64_t(at.c0 + c);
#pragma unroll
        for (int j = 0; j < kB; ++j) {
            if (j >= n) break;
            const float x = v[j];
            std::uint8_t code;
            std::uint32_t clamped;
            const float q = p.sr ? cast::fp4_qdq_sr(x, b, cast::rounding_bits({}, e0 + j), code, clamped)
                                 : cast::fp4_qdq(x, b, code, clamped);
            const bool q_fin = (__float_as_uint(q) & ~qk::kSignBit) < qk::kInfBits;
            const double xd = q_fin ? double(x) : 0.0, qd = q_fin ? double(q) : 0.0, d = qd - xd;
            e.sxx += xd * xd;
            e.sdd += d * d;
            e.sqq += qd * qd;
            e.sxq += xd * qd;
            e.max_err = fmaxf(e.max_err, float(fabs(d)));
            e.under += x != 0.0f && (code & 7u) == 0;
            e.over += clamped;
            e.nonfinite += !q_fin;
        }
    }
}

}  // namespace fp8scope::cuda::an
