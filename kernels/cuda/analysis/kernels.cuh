// What the analysis kernels share with their launcher (analysis.cu): the recipe plan, the
// per-tile and total sums as laid out in device memory, and the block reductions.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/analysis/internal.h"
#include "cuda/cast/rules.cuh"
#include "fp8/stats.h"

namespace fp8scope::cuda::an {

constexpr int kTile = 128;           // tile edge: every supported block lies inside one tile
// Shared-memory row stride of a tile: a stored tile is written a 16-byte run at a time,
// so its rows stay 16-byte aligned; a transposed one is written a column at a time, so
// its rows are one element longer (consecutive rows fall in different banks).
template <class T, bool kTransposed>
constexpr int kRowStride = kTransposed ? kTile + 1 : kTile + int(16 / sizeof(T));
template <class T>
constexpr int kTileElements = kTile * (kTile + int(16 / sizeof(T)));  // room for either
constexpr int kThreads = 256;        // per tile: warp w takes rows w + 8 i, lane l columns l + 32 j
constexpr int kWarps = kThreads / 32;
constexpr int kRowsPerWarp = kTile / kWarps;
constexpr int kMaxRecipes = 32;
constexpr int kMaxBlocks = 512;      // blocks of one recipe in a tile (>= 1 x 32)
constexpr int kMaxTopK = 256;
constexpr int kSlices = 8;           // pass 3 reads a tile in slices of 16 rows (stored layout)
constexpr int kMomentBlocks = 512;   // pass 1 partial sums (fixed: the order never changes; one
                                     // wave at 4 blocks an SM on 128 SMs or more)
constexpr int kIndexBits = 33;       // top-value keys: |x| bits above the complemented index
constexpr std::uint64_t kIndexMask = (std::uint64_t(1) << kIndexBits) - 1;

enum Kind : int { kCurrent = 0, kDelayed = 1, kBlock = 2, kMX = 3, kFP4 = 4 };

struct RecipePlan {
    int kind;
    Format format;
    int block_rows_log2, block_cols_log2;  // block and MX recipes
    int pow2;
    MXRule rule;
    float eps;            // current scaling
    float delayed_scale;  // delayed scaling: the scale it casts with
    int fp4_nv, rht, sr;  // FP4: NVFP4 (else MXFP4), its options (params s, si: S_enc, S_dec)
};

struct Plans {
    RecipePlan r[kMaxRecipes];
    int count;
};

// Pass 1 partials and totals (MomentTotals' device twin, with the zeros and the least
// nonzero finite |x| that CentralTotals holds).
struct Moments {
    double sum, sum2;
    unsigned amax, amax_finite, min_nz;
    unsigned long long nan, inf, zero;
};

// Pass 1's results that later passes read.
struct Params {
    double mean, threshold;
    // Pass 2's central sums are power sums of d = x 2^-dev_exp - pivot (|d| < 2 there), in
    // float32 per thread: pivot is the float nearest mean 2^-dev_exp and delta what it
    // misses, which the totals correct for exactly. Tensors too small for a float32 scale
    // (dev_exp < kMinDevExp) take the same sums in float64.
    int dev_exp;
    float dev_norm, pivot;  // 2^-dev_exp (float), the pivot
    double dev_norm_d, delta;
    float threshold_f;  // the largest float <= threshold: |x| > threshold is |x| > threshold_f
    int all_finite;     // x holds no NaN or Inf
    float s[kMaxRecipes], si[kMaxRecipes];  // per-tensor recipes
};
constexpr int kMinDevExp = -100;

// Per tile: power sums of d (Params), the count beyond the threshold, the least nonzero
// |x| (when recipes are analysed: their bounds) and the largest finite |x|.
struct TileStats {
    double s1, s2, s3, s4;
    unsigned beyond, min_nz, smax;
};

// Per tile and recipe, and the totals per recipe (ErrorTotals' twin).
struct TileError {
    double sxx, sdd, sqq, sxq;
    float max_err, si_min, si_max;
    unsigned underflow, overflow, nonfinite;
};

struct Totals {  // named as ErrorTotals, whose error_totals() copies them
    double sxx, sdd, sqq, sxq, max_err;
    unsigned long long underflow, overflow, nonfinite_out;
    float scale_inv_min, scale_inv_max;
};

struct CentralTotalsDev {
    double m2, m4;
    unsigned long long beyond;
};

struct Candidate {
    unsigned long long key;  // |x| bits << 33 | (kIndexMask - row-major index of the view)
    float value;
};

// Everything the host reads back, in one copy.
struct Summary {
    Moments moments;
    Params params;
    CentralTotalsDev central;
    Totals errors[kMaxRecipes];
    unsigned long long hist[kHistBins];
    unsigned top_threshold;  // the top_k-th largest of pass 1's block maxima (bits)
    unsigned top_tiles;      // tiles whose maximum reaches it, listed for pass 3
    unsigned moments_done;   // pass 1's blocks that have left their partials
    unsigned candidates;     // pass 3's count of tile candidates
    unsigned top_count;      // values in top, <= top_k
    unsigned rht_amax;       // amax of the Hadamard-transformed view (FP4 quantizers with rht)
    Candidate top[kMaxTopK];
};

// ---- reductions over a block of kThreads (fixed order: the same sums every run) ---------

template <class T, class Op>
__device__ __forceinline__ T warp_reduce(T v, Op op) {
    for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_down_sync(0xffffffffu, v, o));
    return v;
}

// The block's reduction of v, valid in thread 0: each warp reduces its lanes, then warp 0
// the warps' results, both with shuffles (fixed order: the same sums every run). `scratch`
// holds blockDim.x / 32 values of T.
template <class T, class Op>
__device__ __forceinline__ T block_reduce(T v, Op op, T* scratch) {
    v = warp_reduce(v, op);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = int(blockDim.x / 32);
    __syncthreads();
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = scratch[lane < warps ? lane : 0];
        for (int o = 16; o > 0; o >>= 1) {
            const T t = __shfl_down_sync(0xffffffffu, v, o);
            if (lane + o < warps) v = op(v, t);
        }
    }
    return v;
}

struct Add {
    template <class T>
    __device__ T operator()(T a, T b) const { return a + b; }
};
struct Max {
    template <class T>
    __device__ T operator()(T a, T b) const { return a > b ? a : b; }
};
struct Min {
    template <class T>
    __device__ T operator()(T a, T b) const { return a < b ? a : b; }
};

// Sums of a struct over the block with a single barrier (block_combine): each warp reduces
// its lanes with shuffles (fixed order), lane 0 leaves the warp's sums in `parts`
// (blockDim.x / 32 of them), warp 0 adds those with shuffles. The result is valid in thread
// 0; `parts` may be reused after the next barrier.
__device__ __forceinline__ TileStats shuffle_down(const TileStats& v, int o) {
    return {__shfl_down_sync(0xffffffffu, v.s1, o),     __shfl_down_sync(0xffffffffu, v.s2, o),
            __shfl_down_sync(0xffffffffu, v.s3, o),     __shfl_down_sync(0xffffffffu, v.s4, o),
            __shfl_down_sync(0xffffffffu, v.beyond, o), __shfl_down_sync(0xffffffffu, v.min_nz, o),
            __shfl_down_sync(0xffffffffu, v.smax, o)};
}
__device__ __forceinline__ TileStats combine(const TileStats& a, const TileStats& b) {
    return {a.s1 + b.s1,         a.s2 + b.s2,     a.s3 + b.s3,           a.s4 + b.s4,
            a.beyond + b.beyond, min(a.min_nz, b.min_nz), max(a.smax, b.smax)};
}
__device__ __forceinline__ TileError shuffle_down(const TileError& v, int o) {
    return {__shfl_down_sync(0xffffffffu, v.sxx, o),       __shfl_down_sync(0xffffffffu, v.sdd, o),
            __shfl_down_sync(0xffffffffu, v.sqq, o),       __shfl_down_sync(0xffffffffu, v.sxq, o),
            __shfl_down_sync(0xffffffffu, v.max_err, o),   __shfl_down_sync(0xffffffffu, v.si_min, o),
            __shfl_down_sync(0xffffffffu, v.si_max, o),    __shfl_down_sync(0xffffffffu, v.underflow, o),
            __shfl_down_sync(0xffffffffu, v.overflow, o),  __shfl_down_sync(0xffffffffu, v.nonfinite, o)};
}
__device__ __forceinline__ TileError combine(const TileError& a, const TileError& b) {
    return {a.sxx + b.sxx,
            a.sdd + b.sdd,
            a.sqq + b.sqq,
            a.sxq + b.sxq,
            fmaxf(a.max_err, b.max_err),
            fminf(a.si_min, b.si_min),
            fmaxf(a.si_max, b.si_max),
            a.underflow + b.underflow,
            a.overflow + b.overflow,
            a.nonfinite + b.nonfinite};
}
__device__ __forceinline__ Moments shuffle_down(const Moments& v, int o) {
    return {__shfl_down_sync(0xffffffffu, v.sum, o),         __shfl_down_sync(0xffffffffu, v.sum2, o),
            __shfl_down_sync(0xffffffffu, v.amax, o),        __shfl_down_sync(0xffffffffu, v.amax_finite, o),
            __shfl_down_sync(0xffffffffu, v.min_nz, o),      __shfl_down_sync(0xffffffffu, v.nan, o),
            __shfl_down_sync(0xffffffffu, v.inf, o),         __shfl_down_sync(0xffffffffu, v.zero, o)};
}
__device__ __forceinline__ Moments combine(const Moments& a, const Moments& b) {
    return {a.sum + b.sum,           a.sum2 + b.sum2, max(a.amax, b.amax), max(a.amax_finite, b.amax_finite),
            min(a.min_nz, b.min_nz), a.nan + b.nan,   a.inf + b.inf,       a.zero + b.zero};
}

__device__ __forceinline__ Totals shuffle_down(const Totals& v, int o) {
    return {__shfl_down_sync(0xffffffffu, v.sxx, o),       __shfl_down_sync(0xffffffffu, v.sdd, o),
            __shfl_down_sync(0xffffffffu, v.sqq, o),       __shfl_down_sync(0xffffffffu, v.sxq, o),
            __shfl_down_sync(0xffffffffu, v.max_err, o),   __shfl_down_sync(0xffffffffu, v.underflow, o),
            __shfl_down_sync(0xffffffffu, v.overflow, o),  __shfl_down_sync(0xffffffffu, v.nonfinite_out, o),
            __shfl_down_sync(0xffffffffu, v.scale_inv_min, o),    __shfl_down_sync(0xffffffffu, v.scale_inv_max, o)};
}
__device__ __forceinline__ Totals combine(const Totals& a, const Totals& b) {
    return {a.sxx + b.sxx,
            a.sdd + b.sdd,
            a.sqq + b.sqq,
            a.sxq + b.sxq,
            fmax(a.max_err, b.max_err),
            a.underflow + b.underflow,
            a.overflow + b.overflow,
            a.nonfinite_out + b.nonfinite_out,
            fminf(a.scale_inv_min, b.scale_inv_min),
            fmaxf(a.scale_inv_max, b.scale_inv_max)};
}

// The tiles' central sums (TileStats) added up.
struct CentralSums {
    double s1, s2, s3, s4;
    unsigned long long beyond;
};
__device__ __forceinline__ CentralSums shuffle_down(const CentralSums& v, int o) {
    return {__shfl_down_sync(0xffffffffu, v.s1, o), __shfl_down_sync(0xffffffffu, v.s2, o),
            __shfl_down_sync(0xffffffffu, v.s3, o), __shfl_down_sync(0xffffffffu, v.s4, o),
            __shfl_down_sync(0xffffffffu, v.beyond, o)};
}
__device__ __forceinline__ CentralSums combine(const CentralSums& a, const CentralSums& b) {
    return {a.s1 + b.s1, a.s2 + b.s2, a.s3 + b.s3, a.s4 + b.s4, a.beyond + b.beyond};
}

template <class S>
__device__ __forceinline__ S block_combine(S v, S* parts) {
    for (int o = 16; o > 0; o >>= 1) v = combine(v, shuffle_down(v, o));
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = int(blockDim.x / 32);
    if (lane == 0) parts[warp] = v;
    __syncthreads();
    if (warp == 0) {  // the warps' results, by shuffles too
        v = parts[lane < warps ? lane : 0];
        for (int o = 16; o > 0; o >>= 1) {
            const S t = shuffle_down(v, o);
            if (lane + o < warps) v = combine(v, t);
        }
    }
    return v;
}

// ---- the tile of the view in shared memory ------------------------------------------------

// Values as float32: x itself, or the exact float32 of a BF16 (its bits, stored as uint16).
__device__ __forceinline__ float as_float(float v) { return v; }
__device__ __forceinline__ float as_float(std::uint16_t b) { return __uint_as_float(unsigned(b) << 16); }

// The tile of block b of a grid: origin and extent.
struct TileAt {
    std::int64_t r0, c0;
    int nr, nc;
};
__device__ __forceinline__ TileAt tile_at(const TileInput& in, std::int64_t tile) {
    TileAt t;
    t.r0 = (tile / in.grid_cols) * kTile;
    t.c0 = (tile % in.grid_cols) * kTile;
    t.nr = in.rows - t.r0 < kTile ? int(in.rows - t.r0) : kTile;
    t.nc = in.cols - t.c0 < kTile ? int(in.cols - t.c0) : kTile;
    return t;
}

// The same tile in the stored layout (a transposed view's columns are stored rows): its
// first stored row a0 and element b0, na stored rows of nb elements inside the tensor, and
// whether every 16-byte run of it is one aligned load (`whole`: no checks needed).
struct StoredTile {
    std::int64_t a0, b0, stride;
    int na, nb;
    bool whole;
};
template <class T, bool kTransposed>
__device__ __forceinline__ StoredTile stored_tile(const TileInput& in, const TileAt& at) {
    StoredTile s;
    s.a0 = kTransposed ? at.c0 : at.r0;
    s.b0 = kTransposed ? at.r0 : at.c0;
    s.stride = kTransposed ? in.rows : in.cols;
    s.na = kTransposed ? at.nc : at.nr;
    s.nb = kTransposed ? at.nr : at.nc;
    s.whole = in.vec_load && s.stride % (16 / sizeof(T)) == 0 && s.na == kTile && s.nb == kTile;
    return s;
}

// A 16-byte run of the stored tile: stored row a, elements b on (zeros outside the
// tensor). One 16-byte load where the stride and the address allow, else single elements.
template <class T>
__device__ __forceinline__ uint4 load_run(const TileInput& in, const StoredTile& st, int a, int b) {
    constexpr int kV = 16 / sizeof(T);
    const T* src = static_cast<const T*>(in.data) + (st.a0 + a) * st.stride + st.b0 + b;
    if (st.whole || (in.vec_load && st.stride % kV == 0 && a < st.na && b + kV <= st.nb))
        return __ldg(reinterpret_cast<const uint4*>(src));
    T v[kV];
#pragma unroll
    for (int k = 0; k < kV; ++k) v[k] = a < st.na && b + k < st.nb ? src[k] : T(0);
    uint4 q;
    memcpy(&q, v, 16);
    return q;
}

// The view's tile `at` into tile[r * row_stride + c] in the input's type (zeros outside
// the tensor), so a BF16 tile takes half the shared memory. Threads read 16-byte runs of
// the stored layout (load_run).
template <class T, bool kTransposed>
__device__ __forceinline__ void load_tile(const TileInput& in, const TileAt& at, T* tile) {
    constexpr int kV = 16 / sizeof(T);  // elements per 16-byte run
    constexpr int kRuns = kTile * kTile / kV;
    constexpr int kRow = kRowStride<T, kTransposed>;
    const StoredTile st = stored_tile<T, kTransposed>(in, at);
#pragma unroll 4
    for (int i = threadIdx.x; i < kRuns; i += blockDim.x) {
        // (a, b) = (stored row in the tile, first element)
        const int a = i / (kTile / kV), b = (i % (kTile / kV)) * kV;
        const uint4 q = load_run<T>(in, st, a, b);
        if constexpr (kTransposed) {
            T v[kV];
            memcpy(v, &q, 16);
#pragma unroll
            for (int k = 0; k < kV; ++k) tile[(b + k) * kRow + a] = v[k];
        } else {
            *reinterpret_cast<uint4*>(tile + a * kRow + b) = q;
        }
    }
}

}  // namespace fp8scope::cuda::an
