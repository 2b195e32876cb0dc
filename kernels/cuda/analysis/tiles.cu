// Pass 2 of the device analysis (analysis.h): one block of threads per 128 x 128 tile of
// the view. The tile is loaded once into shared memory in the input's type (transposed on
// the way when the view is), then read from there by the statistics and by every recipe.
#include "cuda/analysis/internal.h"
#include "cuda/analysis/fp4.cuh"
#include "cuda/analysis/kernels.cuh"
#include "cuda/analysis/stats.cuh"
#include "cuda/runtime/check.h"

namespace fp8scope::cuda::an {
namespace {

using qk::kInfBits;
constexpr unsigned kAbs = ~qk::kSignBit;

// FP8 rounding of y0, y1 (not NaN) as floats, saturating: the hardware conversion, which
// equals cast_rules.h's round_sat for every non-NaN float32 (cvt.rn.satfinite), decoded exactly.
template <Format F>
__device__ __forceinline__ float2 round_sat2(float y0, float y1) {
    return qk::decode2<F>(qk::cast2_fast<F>(y0, y1));
}

// Per-thread error sums of one recipe: products in float32 on values normalised by the
// tile's power of two; an element whose x' or difference is too small to square in
// float32 (x' far below x: saturation under a stale scale) goes to float64 sums.
struct ErrAcc {
    float sxx = 0, sdd = 0, sqq = 0, sxq = 0, max_err = 0;
    double sdd_tiny = 0, sqq_tiny = 0, sxq_tiny = 0;
    unsigned under = 0, over = 0, nonfinite = 0;
};

// One element cast with scale s, whose product was y and rounding r; it counts only when
// `use` (x finite and inside the tile, its block's scale a number), and the caller has
// made v and y 0 when not, so an unused element adds nothing without a select of its own.
// A dequantized value past float32 (or through a NaN scale_inv) is left out of the sums.
template <Format F, bool kNorm, bool kTiny, bool kCounts>
__device__ __forceinline__ void error_element(bool use, float v, float y, float r, float si, float norm, ErrAcc& e) {
    if (kCounts) {
        e.over += fabsf(y) > qk::Fp8<F>::kFastMax;
        e.under += (v != 0.0f) & (r == 0.0f);
    }
    float q = __fmul_rn(r, si), d = __fsub_rn(q, v);
    if (!(fabsf(q) < INFINITY)) {  // rare
        e.nonfinite += use;
        q = d = v = 0.0f;
    }
    const float xn = kNorm ? v * norm : v, qn = kNorm ? q * norm : q, dn = kNorm ? d * norm : d;
    e.sxx = fmaf(xn, xn, e.sxx);
    constexpr unsigned kTinyBits = 0x21800000u;  // 2^-60: squares below 2^-120 lose bits
    const unsigned qa = __float_as_uint(qn) & kAbs, da = __float_as_uint(dn) & kAbs;
    if (!kTiny || min(qa - 1u, da - 1u) >= kTinyBits - 1u) {  // each 0 or >= 2^-60
        e.sqq = fmaf(qn, qn, e.sqq);
        e.sxq = fmaf(xn, qn, e.sxq);
        e.sdd = fmaf(dn, dn, e.sdd);
    } else {
        const double xd = xn, qd = qn, dd = dn;
        e.sqq_tiny += qd * qd;
        e.sxq_tiny += xd * qd;
        e.sdd_tiny += dd * dd;
    }
    e.max_err = fmaxf(e.max_err, fabsf(d));
}

template <class T>
struct TileShared {
    T tile[kTileElements<T>];
    unsigned blk_amax[kMaxBlocks], blk_raw[kMaxBlocks];
    float blk_s[kMaxBlocks], blk_si[kMaxBlocks];
    unsigned channel[kTile];
    TileStats stats_parts[kWarps];
    TileError error_parts[2][kWarps];  // alternate recipes use alternate halves
    unsigned range[3][kWarps];         // block_scales: per warp, least s, largest s, least scale_inv
};

// What bounds a recipe's products in a tile: the least and largest scale and the least
// scale_inv of its blocks (per-tensor recipes: the tensor's).
struct ScaleRange {
    float s_min, s_max, si_min;
};

// The block scales of recipe p over the tile; returns the range of scale_inv of the blocks
// that exist (a block whose scale is NaN, an MX block holding NaN or Inf, is left out) as
// this thread saw it, and their ScaleRange over the whole tile. `amax_ready`: the block
// amaxes are those of the previous recipe (same block shape), only the scales change.
template <class T, int kRow>
__device__ ScaleRange block_scales(const RecipePlan& p, bool amax_ready, int nr, int nc, TileShared<T>& sh,
                                   float& si_min, float& si_max) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int bc = 1 << p.block_cols_log2, per_row = kTile >> p.block_cols_log2, lanes_j = bc / 32;
    const int blocks = (kTile >> p.block_rows_log2) * per_row;
    if (!amax_ready)
        for (int b = threadIdx.x; b < blocks; b += blockDim.x) sh.blk_amax[b] = sh.blk_raw[b] = 0u;
    __syncthreads();  // also: the previous recipe is done with the scales
    for (int i = 0; i < kRowsPerWarp && !amax_ready; ++i) {
        const int r = warp + kWarps * i;
        if (r >= nr) break;  // the same for the whole warp
        for (int bcol = 0; bcol < per_row; ++bcol) {
            unsigned m = 0, raw = 0;
            for (int jj = 0; jj < lanes_j; ++jj) {
                const int c = lane + 32 * (bcol * lanes_j + jj);
                const unsigned a = c < nc ? __float_as_uint(as_float(sh.tile[r * kRow + c])) & kAbs : 0u;
                raw = max(raw, a);
                m = max(m, a <= kInfBits ? a : 0u);
            }
            m = __reduce_max_sync(0xffffffffu, m);
            raw = __reduce_max_sync(0xffffffffu, raw);
            if (lane == 0 && raw) {
                const int b = (r >> p.block_rows_log2) * per_row + bcol;
                atomicMax(&sh.blk_amax[b], m);
                atomicMax(&sh.blk_raw[b], raw);
            }
        }
    }
    if (!amax_ready) __syncthreads();
    si_min = INFINITY;
    si_max = -INFINITY;
    float s_min = INFINITY, s_max = 0.0f;
    const bool mx = p.kind == kMX;
    for (int b = threadIdx.x; b < blocks; b += blockDim.x) {
        const qk::BlockScale s = qk::block_scale(mx ? sh.blk_raw[b] : sh.blk_amax[b], p.format, mx, p.rule, p.pow2);
        sh.blk_s[b] = s.s;
        sh.blk_si[b] = s.scale_inv;
        const int br0 = (b / per_row) << p.block_rows_log2, bc0 = (b % per_row) * bc;
        if (br0 < nr && bc0 < nc && !qk::is_nan(s.scale_inv)) {
            si_min = fminf(si_min, s.scale_inv);
            si_max = fmaxf(si_max, s.scale_inv);
            s_min = fminf(s_min, s.s);
            s_max = fmaxf(s_max, s.s);
        }
    }
    // Scales are positive: they order as their bits.
    const unsigned w_s_min = __reduce_min_sync(0xffffffffu, __float_as_uint(s_min));
    const unsigned w_s_max = __reduce_max_sync(0xffffffffu, __float_as_uint(s_max));
    const unsigned w_si_min = __reduce_min_sync(0xffffffffu, __float_as_uint(si_min));
    if (lane == 0) sh.range[0][warp] = w_s_min, sh.range[1][warp] = w_s_max, sh.range[2][warp] = w_si_min;
    __syncthreads();
    unsigned lo = sh.range[0][0], hi = sh.range[1][0], ilo = sh.range[2][0];
#pragma unroll
    for (int w = 1; w < kWarps; ++w) {
        lo = min(lo, sh.range[0][w]);
        hi = max(hi, sh.range[1][w]);
        ilo = min(ilo, sh.range[2][w]);
    }
    return {__uint_as_float(lo), __uint_as_float(hi), __uint_as_float(ilo)};
}

// Elements go in pairs (columns c and c + 32) through the paired conversion. Column
// lane + 32 (2 jp + h) lies in block 2 jp + h of its row with 32-column blocks, jp with
// 64, 0 with 128, for every lane alike: a row's kBlocks block scales (0: the tensor's
// scale) are read once. kNorm: products formed on x / 2^e (norm), else on x.
template <Format F, class T, int kRow, int kBlocks, bool kNorm, bool kTiny, bool kCounts>
__device__ void recipe_errors(const RecipePlan& p, float s, float si, int nr, int nc, float norm, TileShared<T>& sh,
                              ErrAcc& e) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    for (int i = 0; i < kRowsPerWarp; ++i) {
        const int r = warp + kWarps * i;
        if (r >= nr) break;
        float row_s[4] = {s, s, s, s}, row_si[4] = {si, si, si, si};
        bool nan_block[4] = {false, false, false, false};  // its elements dequantize to NaN
        if constexpr (kBlocks > 0) {
            const int brow = (r >> p.block_rows_log2) * kBlocks;
#pragma unroll
            for (int b = 0; b < kBlocks; ++b) {
                row_s[b] = sh.blk_s[brow + b];
                nan_block[b] = qk::is_nan(row_s[b]);
                row_si[b] = nan_block[b] ? 0.0f : sh.blk_si[brow + b];  // its elements are unused
            }
        }
#pragma unroll
        for (int jp = 0; jp < kTile / 64; ++jp) {
            float v[2], y[2];
            bool use[2];
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int c = lane + 32 * (2 * jp + h), b = (2 * jp + h) * kBlocks / 4;
                const float x = as_float(sh.tile[r * kRow + c]);
                use[h] = c < nc && (__float_as_uint(x) & kAbs) < kInfBits;
                if constexpr (kBlocks > 0) {
                    e.nonfinite += use[h] & nan_block[b];
                    use[h] = use[h] & !nan_block[b];
                }
                v[h] = use[h] ? x : 0.0f;
                y[h] = use[h] ? __fmul_rn(x, row_s[b]) : 0.0f;
            }
            const float2 rr = round_sat2<F>(y[0], y[1]);
            const float si0 = row_si[(2 * jp) * kBlocks / 4], si1 = row_si[(2 * jp + 1) * kBlocks / 4];
            error_element<F, kNorm, kTiny, kCounts>(use[0], v[0], y[0], rr.x, si0, norm, e);
            error_element<F, kNorm, kTiny, kCounts>(use[1], v[1], y[1], rr.y, si1, norm, e);
        }
    }
}

// recipe_errors for plan p: its blocks per tile row picked at compile time.
template <Format F, class T, int kRow, bool kNorm, bool kTiny, bool kCounts>
__device__ void recipe_errors_of(const RecipePlan& p, float s, float si, int nr, int nc, float norm, TileShared<T>& sh,
                                 ErrAcc& e) {
    if (p.kind == kCurrent || p.kind == kDelayed)
        recipe_errors<F, T, kRow, 0, kNorm, kTiny, kCounts>(p, s, si, nr, nc, norm, sh, e);
    else if (p.block_cols_log2 == 5) recipe_errors<F, T, kRow, 4, kNorm, kTiny, kCounts>(p, s, si, nr, nc, norm, sh, e);
    else if (p.block_cols_log2 == 6) recipe_errors<F, T, kRow, 2, kNorm, kTiny, kCounts>(p, s, si, nr, nc, norm, sh, e);
    else recipe_errors<F, T, kRow, 1, kNorm, kTiny, kCounts>(p, s, si, nr, nc, norm, sh, e);
}

// Whether a product can be tiny (below 2^-60 once normalised, where float32 squares lose
// bits): a nonzero x' is at least the format's least subnormal times the least
// scale_inv, a nonzero |x| at least the tile's least, and a nonzero x' - x at least the
// smaller of the two times 2^-24 (both are multiples of its ulp). Above 2^-36 none is.
template <Format F>
__device__ __forceinline__ bool tiny_possible(const ScaleRange& r, float min_nz, float norm) {
    const float least_sub = F == Format::E4M3 ? 0x1p-9f : 0x1p-16f;
    return !(fminf(least_sub * r.si_min, min_nz) * norm >= 0x1p-36f);
}

// Whether an element can overflow (|x s| past kFastMax: the tile's largest finite |x|
// times the largest scale) or underflow (a nonzero x rounding to 0: its least times the
// least scale at most half the least subnormal). Products round monotonically.
template <Format F>
__device__ __forceinline__ bool counts_possible(const ScaleRange& r, float min_nz, float max_abs) {
    const float half_sub = F == Format::E4M3 ? 0x1p-10f : 0x1p-17f;
    return !(__fmul_rn(max_abs, r.s_max) <= qk::Fp8<F>::kFastMax) || !(__fmul_rn(min_nz, r.s_min) > half_sub);
}

// The error sums of plan p over the tile, through the leanest body this tile allows.
template <Format F, class T, int kRow>
__device__ void recipe_errors_at(const RecipePlan& p, float s, float si, const ScaleRange& range, float min_nz,
                                 float max_abs, int nr, int nc, int norm_exp, float norm, TileShared<T>& sh,
                                 ErrAcc& e) {
    if (tiny_possible<F>(range, min_nz, norm))
        recipe_errors_of<F, T, kRow, true, true, true>(p, s, si, nr, nc, norm, sh, e);
    else if (norm_exp)
        recipe_errors_of<F, T, kRow, true, false, true>(p, s, si, nr, nc, norm, sh, e);
    else if (counts_possible<F>(range, min_nz, max_abs))
        recipe_errors_of<F, T, kRow, false, false, true>(p, s, si, nr, nc, norm, sh, e);
    else
        recipe_errors_of<F, T, kRow, false, false, false>(p, s, si, nr, nc, norm, sh, e);
}

// The tile's statistics (stats.cuh) as this thread sees them, ch[j] the largest
// finite |x| of its column column(j). Checked (tiles that may hold NaN, Inf or elements
// outside the tensor, or need the float64 sums): warp w rows w + 8 i, lane l columns
// l + 32 j. Otherwise (whole tiles of finite tensors) no selects, and a stored tile's rows
// are read two columns at a time: lane l columns 2 l + 64 j and the next.
template <bool kChecked, class T, int kRow>
__device__ void tile_statistics(TileShared<T>& sh, int nr, int nc, const StatsParams& p, Sums& s,
                                unsigned (&ch)[kTile / 32]) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    constexpr bool kPairs = !kChecked && kRow % 2 == 0;
    auto column = [&](int j) { return kPairs ? 2 * lane + 64 * (j / 2) + j % 2 : lane + 32 * j; };
    auto add = [&](T x, int j) { ch[j] = max(ch[j], add_value<kChecked, true>(s, p, as_float(x))); };
    for (int i = 0; i < kRowsPerWarp; ++i) {
        const int r = warp + kWarps * i;
        const T* row = sh.tile + r * kRow;
#pragma unroll
        for (int j = 0; j < kTile / 32; j += kPairs ? 2 : 1) {
            if constexpr (kPairs) {
                struct alignas(2 * sizeof(T)) Pair {
                    T x, y;
                };
                const Pair pair = *reinterpret_cast<const Pair*>(row + column(j));
                add(pair.x, j);
                add(pair.y, j + 1);
            } else if (!kChecked || (r < nr && column(j) < nc)) {
                add(row[column(j)], j);
            }
        }
    }
#pragma unroll
    for (int j = 0; j < kTile / 32; ++j)
        if (ch[j]) atomicMax(&sh.channel[column(j)], ch[j]);
}

}  // namespace

template <class T, bool kTransposed>
__global__ void __launch_bounds__(kThreads, 4) tile_kernel(TileInput in, Plans plans, const Params* params,
                                                        TileStats* tile_stats, TileError* tile_errors,
                                                        unsigned* channel) {
    extern __shared__ __align__(16) unsigned char smem[];
    TileShared<T>& sh = *reinterpret_cast<TileShared<T>*>(smem);
    const std::int64_t tile = blockIdx.x;
    const TileAt at = tile_at(in, tile);
    const int nr = at.nr, nc = at.nc;
    const std::int64_t c0 = at.c0;
    constexpr int kRow = kRowStride<T, kTransposed>;
    for (int c = threadIdx.x; c < kTile; c += blockDim.x) sh.channel[c] = 0u;
    load_tile<T, kTransposed>(in, at, sh.tile);
    __syncthreads();

    // Tensor statistics of the tile (the histogram and the zeros come from pass 1).
    const Params& q = *params;
    const StatsParams p = stats_params(q);
    Sums s;
    unsigned ch[kTile / 32] = {};
    if (unchecked(at, q))
        tile_statistics<false, T, kRow>(sh, nr, nc, p, s, ch);
    else
        tile_statistics<true, T, kRow>(sh, nr, nc, p, s, ch);
    unsigned smax = 0;
#pragma unroll
    for (int j = 0; j < kTile / 32; ++j) smax = max(smax, ch[j]);
    const TileStats st = block_combine(s.tile(smax), sh.stats_parts);
    __shared__ unsigned tile_smax, tile_min_nz;
    if (threadIdx.x == 0) {
        tile_stats[tile] = st;
        tile_smax = st.smax;
        tile_min_nz = st.min_nz;
    }
    __syncthreads();  // also orders the shared channel atomics before their reads
    for (int c = threadIdx.x; c < nc; c += blockDim.x)
        if (sh.channel[c]) atomicMax(&channel[c0 + c], sh.channel[c]);

    // Products are formed on x / 2^e, e the exponent of the tile's largest |x|, unless that
    // is within 2^+-30 of 1, where x's own squares and their sums stay in range.
    const unsigned top_exp = tile_smax >> 23;
    int norm_exp = max(-126, min(126, top_exp ? int(top_exp) - 127 : -126));
    if (norm_exp >= -30 && norm_exp <= 30) norm_exp = 0;
    const float norm = qk::pow2(-norm_exp);
    const float least_nz = __uint_as_float(tile_min_nz);  // Inf when the tile has no nonzero finite |x|
    const float max_abs = __uint_as_float(tile_smax);     // the largest finite |x|

    int amax_shape = -1;  // the block shape whose amaxes the shared buffers hold
    for (int k = 0; k < plans.count; ++k) {
        const RecipePlan& p = plans.r[k];
        const float s = params->s[k], si = params->si[k];
        if (p.kind == kFP4) {
            Fp4Acc f;
            if (p.block_cols_log2 == 5) fp4_errors<32, T, kRow>(p, s, si, in, at, sh.tile, sh.blk_raw, f);
            else fp4_errors<16, T, kRow>(p, s, si, in, at, sh.tile, sh.blk_raw, f);
            amax_shape = -1;  // 16x16 tiles used the block buffers
            const TileError t = block_combine(TileError{f.sxx, f.sdd, f.sqq, f.sxq, f.max_err, f.si_min, f.si_max,
                                                        f.under, f.over, f.nonfinite},
                                              sh.error_parts[k % 2]);
            if (threadIdx.x == 0) tile_errors[tile * plans.count + k] = t;
            continue;
        }
        float si_min = si, si_max = si;
        ScaleRange range{s, s, si};
        if (p.kind == kBlock || p.kind == kMX) {
            const int shape = p.block_rows_log2 * 16 + p.block_cols_log2;
            range = block_scales<T, kRow>(p, shape == amax_shape, nr, nc, sh, si_min, si_max);
            amax_shape = shape;
        }
        ErrAcc e;
        if (p.format == Format::E4M3)
            recipe_errors_at<Format::E4M3, T, kRow>(p, s, si, range, least_nz, max_abs, nr, nc, norm_exp, norm, sh, e);
        else
            recipe_errors_at<Format::E5M2, T, kRow>(p, s, si, range, least_nz, max_abs, nr, nc, norm_exp, norm, sh, e);
        const double back = ldexp(1.0, 2 * norm_exp);
        TileError t = block_combine(TileError{double(e.sxx), double(e.sdd) + e.sdd_tiny, double(e.sqq) + e.sqq_tiny,
                                              double(e.sxq) + e.sxq_tiny, e.max_err, si_min, si_max, e.under, e.over,
                                              e.nonfinite},
                                    sh.error_parts[k % 2]);
        if (threadIdx.x == 0) {
            t.sxx *= back, t.sdd *= back, t.sqq *= back, t.sxq *= back;
            tile_errors[tile * plans.count + k] = t;
        }
    }
}

void launch_tiles(const TileInput& in, const Plans& plans, const Params* params, TileStats* tile_stats,
                  TileError* tile_errors, unsigned* channel, cudaStream_t stream) {
    const std::size_t shared = in.dtype == DType::BF16 ? sizeof(TileShared<std::uint16_t>) : sizeof(TileShared<float>);
    auto go = [&](auto kernel) {
        FP8SCOPE_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(shared)));
        kernel<<<unsigned(in.tiles()), kThreads, shared, stream>>>(in, plans, params, tile_stats, tile_errors,
                                                                   channel);
        FP8SCOPE_CUDA_LAUNCHED();
    };
    const bool bf16 = in.dtype == DType::BF16;
    if (bf16 && in.transposed) go(tile_kernel<std::uint16_t, true>);
    else if (bf16) go(tile_kernel<std::uint16_t, false>);
    else if (in.transposed) go(tile_kernel<float, true>);
    else go(tile_kernel<float, false>);
}

}  // namespace fp8scope::cuda::an
