// The vectorized leaf kernels of the cast, the cast-transpose and the fused analysis,
// compiled once per x86-64 vector ISA (simd_kernels.cpp with -march=x86-64, -v3, -v4)
// and chosen at run time from the CPU (cpu_info.h: cpu_isa()), so a portable build runs
// the AVX-512 code on an AVX-512 machine. Every path computes the same float32 steps in
// the same order, and sums in the same 16 lanes, so all give bitwise the same results
// (tests/core/test_cpu_kernels.cpp checks each path against the portable one).
//
// The kernels are plain functions on raw pointers: the ISA-compiled file includes no
// standard-library templates whose out-of-line copies could stand in for the baseline
// ones at link time.
#pragma once

#include <cstdint>

#include "cpu/cpu_info.h"

namespace fp8scope::simd {

constexpr int kLanes = 16;  // float64 lanes of every sum (one AVX-512 vector of floats)

// Pass 1 of the analysis over one range (sums of finite values, amaxes as float32 bits).
struct MomentSums {
    double sum[kLanes] = {}, sum2[kLanes] = {};
    std::uint32_t amax = 0;         // scaling amax: NaN ignored, Inf included
    std::uint32_t amax_finite = 0;  // finite values only
    std::int64_t nan = 0, inf = 0;
};

// Central moments of finite values, the count beyond a threshold, the least nonzero |x|.
struct CentralSums {
    double m2[kLanes] = {}, m4[kLanes] = {};
    std::int64_t beyond = 0;
    std::uint32_t min_nz = 0x7F800000u;  // Inf bits: no nonzero value yet
};

// Quantization error of finite x with finite x'.
struct ErrorSums {
    double sxx[kLanes] = {}, sdd[kLanes] = {}, sqq[kLanes] = {}, sxq[kLanes] = {}, max_err[kLanes] = {};
    std::int64_t underflow = 0, overflow = 0, nonfinite_out = 0;
};

// One tile of a 1 x B cast-transpose: rows [0, nr) x columns [0, nc) of x (row stride
// ld), every row of it one rowwise block, every column one columnwise block (nr, nc <=
// 128); `xt` (nc x nr, row stride nr) receives its transpose, from which the columnwise
// copy is cast row by row, as the rowwise copy is cast from the rows of x.
struct Tile {
    const float* x;
    std::int64_t ld;
    int nr, nc;
    float* xt;
};

// Scales of the blocks of a tile and where the copies go. A block whose scale is NaN
// (an MX block holding NaN or Inf) is all NaN.
struct TileCast {
    const float *s_row, *si_row, *s_col, *si_col;  // (nr), (nc)
    float* rowwise;                                // (nr, nc) at row stride ld_row
    std::int64_t ld_row;
    float* columnwise;                             // (nc, nr) = the transpose, row stride ld_col
    std::int64_t ld_col;
};

// One AdamW update (Backend::adamw, core/backend.h).
struct AdamWArgs {
    float beta1, beta2, eps, weight_decay, lr, bias_correction1, bias_correction2, grad_scale;
};

// Philox4x32-10's input besides the counter (cast::RoundingKey in words): counter words
// 1-3 and the key.
struct PhiloxKey {
    std::uint32_t tensor, step_lo, step_hi, seed_lo, seed_hi;
};

struct Kernels {
    const char* isa;
    // Scaling amax of x[0, n) as float32 bits; `nonfinite` set when any element is NaN/Inf.
    std::uint32_t (*amax)(const float* x, std::int64_t n, bool* nonfinite);
    // out[i] = decode(cast(x[i] * s)) * si; returns the finite inputs that saturation
    // clamped. Index: 0 E4M3, 1 E5M2.
    std::int64_t (*fake[2])(const float* x, std::int64_t n, float s, float si, float* out);
    // The same, also returning the scaling amax of x (delayed scaling: one pass).
    std::int64_t (*fake_amax[2])(const float* x, std::int64_t n, float s, float si, float* out,
                                 std::uint32_t* amax);
    // Transposes a tile into t.xt and returns the scaling amaxes (bits) of its rows and
    // columns with their non-finite flags (both as maxima down columns, of x and of xt).
    void (*tile_amax)(const Tile& t, std::uint32_t* row_amax, std::uint8_t* row_nonfinite,
                      std::uint32_t* col_amax, std::uint8_t* col_nonfinite);
    // Both copies of a tile (after tile_amax); returns the rowwise copy's clamped finite inputs.
    std::int64_t (*tile_cast[2])(const Tile& t, const TileCast& c);
    // dst (c1-c0 rows of stride ld_dst) = the transpose of src rows [r0, r1), cols [c0, c1).
    void (*transpose_block)(float* dst, std::int64_t ld_dst, const float* src, std::int64_t ld_src,
                            std::int64_t r0, std::int64_t r1, std::int64_t c0, std::int64_t c1);
    // FP4 (fp4.h). out[i] for x[0, n), one row cut into blocks of `block` elements (the last
    // may be short), block b cast by cast::fp4_qdq under (enc[b], scale[b], dec), or with
    // `bits` by cast::fp4_qdq_sr with bits[i]; a block whose scale is NaN is all NaN (that
    // scale). Returns the finite inputs clamped to +-6 outside NaN blocks.
    std::int64_t (*fp4_fake_row)(const float* x, std::int64_t n, int block, const float* enc, const float* scale,
                                 float dec, const std::uint32_t* bits, float* out);
    // amax[b] = max(amax[b], largest |x| bits of block b of x[0, n)), NaN bits included
    // (>= Inf bits: the block is not finite); max-accumulates, so tiles take it row by row.
    void (*block_amax)(const float* x, std::int64_t n, int block, std::uint32_t* amax);
    // out[i] = cast::rounding_bits(key, e0 + i) for i in [0, n).
    void (*rounding_bits)(const PhiloxKey& key, std::uint64_t e0, std::int64_t n, std::uint32_t* out);
    // Columns [r0, r1) of t (cols x rows) = the transpose of rows [r0, r1) of x (rows x
    // cols), each of t's row segments cast::rht16-transformed when `rht` and r1 - r0 = 16;
    // returns the scaling amax (bits) of what it wrote.
    std::uint32_t (*rht_transpose)(float* t, const float* x, std::int64_t rows, std::int64_t cols, std::int64_t r0,
                                   std::int64_t r1, bool rht);
    // AdamW over [0, n): params, m and v updated in place, with weight decay or without.
    void (*adamw)(float* params, const float* grads, float* m, float* v, bool decay, std::int64_t n,
                  const AdamWArgs& a);
    // The analysis (analysis.cpp): pass 1, central moments (returns the largest finite
    // |x| bits of the segment), error sums of one recipe's block segment.
    void (*moment_sums)(const float* x, std::int64_t n, MomentSums& acc);
    std::uint32_t (*central_sums)(const float* x, std::int64_t n, double mean, double threshold, CentralSums& acc);
    void (*error_sums[2])(const float* x, std::int64_t n, float s, float si, ErrorSums& acc);
};

// The kernels of cpu_isa() (chosen once), or of one ISA (tests; null when this build or
// CPU has no such path).
const Kernels& kernels();
const Kernels* kernels_for(Isa isa);

inline int format_index(bool e5m2) { return e5m2 ? 1 : 0; }

}  // namespace fp8scope::simd
