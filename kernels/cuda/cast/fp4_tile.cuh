// The FP4 tile kernel shared by the code cast (fp4.cu) and the training cast
// (fp4_train.cu); they differ only in what a cast block stores (an Out policy):
//   Out::kind  codes  packed E2M1 codes and block scale codes
//              values BF16 decode(q) * s_b (exact: E2M1 x E4M3, or x 2^e)
//
// A CTA casts tiles of 64 rows by 4 blocks of B columns of x to both copies from one
// read (as many CTAs as are resident at once, each looping over tiles with the next
// tile's loads in flight while it casts the current one). Thread t first holds the
// rowwise block (row t / 4, block t % 4), loaded with its neighbour lane so that every
// load instruction reads whole 32-byte sectors (issue_raw); it casts that block at once
// and parks the values in shared memory as float32. Then it reads one columnwise block
// back (column t % 4B, rows B (t / 4B) ...): the transpose, which with rht it transforms
// (cast::rht16 on each full 16 rows; a tail of fewer rows of x stays as it is) before
// the cast. nvfp4_2d's 16x16 tiles take their amax from 16 lanes of the columnwise pass
// (a warp's 16 neighbouring columns), which the rowwise pass then reads back from shared
// memory. Stores pair lanes up the same way (store_pairs): a partial-sector store costs
// the L2 as much as a whole one, and the cast is bound by L2 traffic, not DRAM.
//
// Every element follows cast_rules.h: block scale by nvfp4_block_scale / mxfp4_block_scale,
// q = e2m1_code(x * enc) or e2m1_code_sr (fp4_round.h's equal float forms) with the
// Philox bits rounding_bits(key, e) of the element's row-major index e in its copy
// (nvfp4_2d without rht: the columnwise copy is the rowwise one transposed, bits and all).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <variant>

#include "cuda/cast/fp4_round.h"
#include "cuda/cast/launch.cuh"
#include "cuda/cast/quantize.h"
#include "cuda/cast/rules.cuh"
#include "cuda/runtime/check.h"
#include "fp8/cast_rules.h"
#include "fp8/recipe.h"

namespace fp8scope::cuda::fp4k {

constexpr int kRows = 64;
constexpr int kThreads = 256;

// What the kernel needs besides x and where it stores: device scalars included.
struct Params {
    bool nvfp4 = true;
    MXRule rule = MXRule::RCeil;
    bool rht = false;
    bool rowwise = true, columnwise = false;
    cast::RoundingKey key;                 // sr: the rowwise copy's; the columnwise draws with tensor | 1
    const float* amax = nullptr;           // NVFP4: the scaling amax of x (rowwise S_enc)
    const float* col_amax = nullptr;       // NVFP4: that of the columnwise copy (rht: transformed)
    float* row_tensor_scale_inv = nullptr;  // written by CTA 0 (null: not)
    float* col_tensor_scale_inv = nullptr;
    float* tensor_scale = nullptr;          // CTA 0: NaN, the report's scale of block scales; null: not
    std::uint32_t* fused_amax = nullptr;    // atomicMax of x's scaling amax bits (zeroed before); null: not
    unsigned long long* overflow = nullptr;  // [2], added to (zeroed before)
};

// The quantizer's part of Params: NVFP4 or MXFP4 (and its rule), rht.
inline Params params_of(const Recipe& recipe) {
    Params p;
    if (const auto* nv = std::get_if<NVFP4Scaling>(&recipe)) {
        p.rht = nv->rht;
    } else {
        const auto& mx = std::get<MXFP4Scaling>(recipe);
        p.nvfp4 = false;
        p.rule = mx.rule;
        p.rht = mx.rht;
    }
    return p;
}

// Before a cast, in one launch: the two overflow counters, *amax and (not null) *col_amax
// zeroed, for the kernels after it to add into.
void zero_totals(unsigned long long* overflow, float* amax, float* col_amax, cudaStream_t stream);

// NVFP4's amax pass (fp4_amax.cu), after zero_totals: *amax = the scaling amax of x; with
// rht also *col_amax = that of the columnwise copy after its transform, from the same read.
void amax_pass(const CastInput& x, bool rht, float* amax, float* col_amax, cudaStream_t stream);

// One cast block of a copy: where it lies in its copy (row, first column, elements n
// inside the copy), whether it writes the scale, and the indices its random bits are
// drawn for (e0 + j e_step: the element's in its copy, or in the rowwise copy where the
// columnwise one is its transpose).
struct Block {
    std::int64_t row, col, rows, cols;  // copy shape rows x cols
    int n;             // 0: a lane whose block lies outside x (it casts zeros, stores nothing)
    bool write_scale;  // 2-D tiles: the first row of a tile writes the tile's scale
    std::uint64_t e0, e_step;
};

template <class T>
__device__ __forceinline__ float load_as_float(const T* x, std::int64_t i) {
    if constexpr (sizeof(T) == 2) return __uint_as_float(unsigned(x[i]) << 16);
    else return x[i];
}

// A thread's rowwise run of B elements as loaded: 16-byte words of BF16 pairs or floats.
template <class T, int B>
struct Raw {
    static constexpr int kWords = B * int(sizeof(T)) / 16;
    uint4 q[kWords];
};

constexpr unsigned kAllLanes = 0xFFFFFFFFu;

// A 16-byte word from the neighbouring lane (lane ^ 1); every lane of the warp calls it.
__device__ __forceinline__ uint4 swap_with_pair(const uint4& w) {
    return make_uint4(__shfl_xor_sync(kAllLanes, w.x, 1), __shfl_xor_sync(kAllLanes, w.y, 1),
                      __shfl_xor_sync(kAllLanes, w.z, 1), __shfl_xor_sync(kAllLanes, w.w, 1));
}

// a or b by value (a conditional on two array elements would select their addresses and
// send the arrays to local memory).
__device__ __forceinline__ uint4 pick(bool first, uint4 a, uint4 b) {
    return make_uint4(first ? a.x : b.x, first ? a.y : b.y, first ? a.z : b.z, first ? a.w : b.w);
}

// x[gr, gc + j] for j < B (0 outside x), in two halves so that the loads are in flight
// while the tile before is cast: issue_raw starts them, finish_raw (one tile later) puts
// the words in order. Lanes 2k and 2k + 1 hold neighbouring runs of a row (gc and gc + B):
// where both are inside x and aligned they load their 2B elements together, each load
// instruction of the pair reading one whole 32-byte sector, and finish_raw swaps the
// words that belong to the other. Every lane of the warp calls finish_raw.
template <class T, int B>
struct PendingRaw {
    Raw<T, B> words;  // as loaded: pairs' words 2k + odd of the pair's run
    bool pair;
};

template <class T, int B>
__device__ __forceinline__ PendingRaw<T, B> issue_raw(const T* x, std::int64_t rows, std::int64_t cols,
                                                      std::int64_t gr, std::int64_t gc, bool vec) {
    constexpr int kW = Raw<T, B>::kWords;
    const bool odd = threadIdx.x & 1;
    const std::int64_t g0 = gc - (odd ? B : 0);
    PendingRaw<T, B> r;
    r.pair = vec && gr < rows && g0 + 2 * B <= cols;
    if (r.pair) {
        const uint4* p = reinterpret_cast<const uint4*>(x + gr * cols + g0) + odd;
#pragma unroll
        for (int k = 0; k < kW; ++k) r.words.q[k] = __ldg(p + 2 * k);
        return r;
    }
    if (vec && gr < rows && gc + B <= cols) {
        const uint4* p = reinterpret_cast<const uint4*>(x + gr * cols + gc);
#pragma unroll
        for (int i = 0; i < kW; ++i) r.words.q[i] = __ldg(p + i);
        return r;
    }
    std::uint32_t w[4 * kW];
    constexpr int kPer = 4 / int(sizeof(T));  // elements per word
#pragma unroll
    for (int k = 0; k < 4 * kW; ++k) {
        w[k] = 0;
#pragma unroll
        for (int e = 0; e < kPer; ++e) {
            const std::int64_t c = gc + k * kPer + e;
            if (gr < rows && c < cols) {
                if constexpr (sizeof(T) == 2) w[k] |= std::uint32_t(x[gr * cols + c]) << (16 * e);
                else w[k] = __float_as_uint(x[gr * cols + c]);
            }
        }
    }
#pragma unroll
    for (int i = 0; i < kW; ++i) r.words.q[i] = make_uint4(w[4 * i], w[4 * i + 1], w[4 * i + 2], w[4 * i + 3]);
    return r;
}

template <class T, int B>
__device__ __forceinline__ Raw<T, B> finish_raw(const PendingRaw<T, B>& r) {
    constexpr int kW = Raw<T, B>::kWords, kHalf = kW / 2;
    const bool odd = threadIdx.x & 1;
    const uint4* got = r.words.q;
    uint4 recv[kHalf];
#pragma unroll
    for (int i = 0; i < kHalf; ++i) recv[i] = swap_with_pair(pick(odd, got[i], got[kHalf + i]));
    if (!r.pair) return r.words;
    Raw<T, B> out;
#pragma unroll
    for (int i = 0; i < kHalf; ++i) {
        out.q[2 * i] = pick(odd, recv[i], got[i]);
        out.q[2 * i + 1] = pick(odd, got[kHalf + i], recv[i]);
    }
    return out;
}

// Stores a lane's kW 16-byte words at p where `whole` (p 16-byte aligned). Where both lanes
// of a pair (lane ^ 1) are whole, each 32-byte half of either run is written by one
// instruction, the even lane its first 16 bytes and the odd lane its second, after a swap:
// whole sectors per instruction whatever the two addresses are (a copy's rows, or the
// columnwise copy's neighbouring rows). A lane whose partner is not whole stores alone.
// Every lane of the warp calls it.
template <int kW>
__device__ __forceinline__ void store_pairs(uint4* p, const uint4 (&w)[kW], bool whole) {
    static_assert(kW % 2 == 0, "whole 32-byte halves");
    const bool odd = threadIdx.x & 1;
    const bool pair = __shfl_xor_sync(kAllLanes, whole ? 1 : 0, 1) && whole;
    const auto at = reinterpret_cast<unsigned long long>(p);
    uint4* partner = reinterpret_cast<uint4*>(__shfl_xor_sync(kAllLanes, at, 1));
#pragma unroll
    for (int s = 0; s < kW; s += 2) {
        const uint4 recv = swap_with_pair(pick(odd, w[s], w[s + 1]));
        if (pair) {  // even: its words s, then the partner's s; odd: the partner's s + 1, then its own
            *(odd ? partner + s + 1 : p + s) = pick(odd, recv, w[s]);
            *(odd ? p + s + 1 : partner + s) = pick(odd, w[s + 1], recv);
        } else if (whole) {
            p[s] = w[s];
            p[s + 1] = w[s + 1];
        }
    }
}

// The loaded words as float32 (BF16 widened exactly).
template <class T, int B>
__device__ __forceinline__ void unpack(const Raw<T, B>& r, float (&v)[B]) {
#pragma unroll
    for (int i = 0; i < Raw<T, B>::kWords; ++i) {
        const std::uint32_t w[4] = {r.q[i].x, r.q[i].y, r.q[i].z, r.q[i].w};
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            if constexpr (sizeof(T) == 2) {
                v[i * 8 + 2 * k] = __uint_as_float(w[k] << 16);
                v[i * 8 + 2 * k + 1] = __uint_as_float(w[k] & 0xFFFF0000u);
            } else {
                v[i * 4 + k] = __uint_as_float(w[k]);
            }
        }
    }
}

// The largest |v| as bits: NaN lies above Inf, so a block holding either reads >= Inf.
template <int B>
__device__ __forceinline__ std::uint32_t amax_bits(const float (&v)[B]) {
    std::uint32_t m = 0;
#pragma unroll
    for (int j = 0; j < B; ++j) m = max(m, __float_as_uint(v[j]) & ~cast::kSignBit);
    return m;
}

// Max over the 16 lanes of a half warp (all 32 lanes call it).
__device__ __forceinline__ std::uint32_t half_warp_max(std::uint32_t m) {
#pragma unroll
    for (int o = 8; o >= 1; o /= 2) m = max(m, __shfl_xor_sync(0xFFFFFFFFu, m, o));
    return m;
}

// Philox words of elements e0 + j step, j < B: one generator call per four elements when
// they are consecutive from a multiple of 4 (a row of x of 4k columns), else one each.
template <int B>
__device__ __forceinline__ void rounding_run(const cast::RoundingKey& k, std::uint64_t e0, std::uint64_t step,
                                             std::uint32_t (&u)[B]) {
    if (step == 1 && (e0 & 3u) == 0) {
#pragma unroll
        for (int g = 0; g < B / 4; ++g) {
            const cast::Philox4 r =
                cast::philox4x32_10(static_cast<std::uint32_t>((e0 >> 2) + g), k.tensor, static_cast<std::uint32_t>(k.step),
                                    static_cast<std::uint32_t>(k.step >> 32), static_cast<std::uint32_t>(k.seed),
                                    static_cast<std::uint32_t>(k.seed >> 32));
#pragma unroll
            for (int w = 0; w < 4; ++w) u[4 * g + w] = r.v[w];
        }
        return;
    }
#pragma unroll
    for (int j = 0; j < B; ++j) u[j] = cast::rounding_bits(k, e0 + j * step);
}

// A copy's tensor scales and, for NVFP4, its block scales by E4M3 code: {s_b, enc_b =
// min(1 / (s_b S_dec), FLT_MAX)}, computed once per CTA by the operations
// nvfp4_block_scale runs per block (so the same bits), in place of a division per block.
struct CopyScales {
    float s_enc = 1.0f, s_dec = 1.0f;
    const float2* by_code = nullptr;  // [128] in shared memory (NVFP4)
};

// The value of a non-negative E4M3 code below NaN.
__device__ __forceinline__ float e4m3_value(int code) {
    const int e = code >> 3, m = code & 7;
    return e ? __uint_as_float(std::uint32_t(e + 120) << 23 | std::uint32_t(m) << 20) : float(m) * 0x1p-9f;
}

__device__ __forceinline__ float2 nvfp4_scale_entry(int code, float s_dec) {
    const float s_b = e4m3_value(code);
    const float enc = cast::div_rn(1.0f, cast::mul_rn(s_b, s_dec));
    return make_float2(s_b, enc > FLT_MAX ? FLT_MAX : enc);
}

// cast::nvfp4_block_scale / mxfp4_block_scale of a block with amax bits `amax`. NVFP4's
// s_b = e4m3(amax_b S_enc / 6) is at most 448 (amax_b <= the tensor amax) but for the
// rounding of the products, so the hardware's satfinite cvt casts it (the same code as
// cast_code up to Fp8<E4M3>::kFastMax), and the table gives s_b and enc_b.
__device__ __forceinline__ cast::FP4BlockScale block_scale(std::uint32_t amax, const Params& p, const CopyScales& c) {
    if (!p.nvfp4) return cast::mxfp4_block_scale(amax, p.rule);
    if (amax >= cast::kInfBits) return cast::nvfp4_block_scale(amax, c.s_enc, c.s_dec);  // NaN
    float v = cast::mul_rn(cast::float_of(amax), cast::mul_rn(c.s_enc, 1.0f / cast::kE2M1Max));
    if (v > FLT_MAX) v = FLT_MAX;
    const std::uint8_t code = v <= qk::Fp8<Format::E4M3>::kFastMax
                                  ? static_cast<std::uint8_t>(qk::cast2_fast<Format::E4M3>(v, 0.0f) & 0xFFu)
                                  : cast::cast_code<Format::E4M3>(v);
    const float2 e = c.by_code[code];
    return cast::FP4BlockScale{e.y, e.x, c.s_dec, code};
}

// Casts one block v[0, B) (n of them inside the copy) under block amax bits `amax` and
// stores it through `out`; returns the finite elements clamped to +-6.
template <int B, bool SR, class Out>
__device__ __forceinline__ unsigned cast_block(const float (&v)[B], std::uint32_t amax, const Params& p,
                                               const CopyScales& scales, const cast::RoundingKey& key, const Block& blk,
                                               const Out& out, int copy) {
    const cast::FP4BlockScale b = block_scale(amax, p, scales);
    const bool finite = amax < cast::kInfBits;
    // Products round monotonically, so |x enc| <= amax enc: only a block where that passes
    // 6 has elements to clamp (an overflow to Inf included), and only there are they
    // counted; elements outside x are zeros and never count.
    const bool count = finite && cast::mul_rn(cast::float_of(amax), b.enc) > cast::kE2M1Max;
    unsigned clamped = 0;
    std::uint32_t u[SR ? B : 1];
    if constexpr (SR) rounding_run<B>(key, blk.e0, blk.e_step, u);
    typename Out::template Acc<B> acc;
#pragma unroll
    for (int j = 0; j < B; ++j) {
        const float y = cast::mul_rn(v[j], b.enc);
        if (count) clamped += (__float_as_uint(y) & ~cast::kSignBit) > cast::kE2M1MaxBits ? 1u : 0u;
        std::uint8_t code = 0;
        float q = 0.0f;
        if constexpr (SR) {  // y is NaN only in a non-finite block
            if constexpr (Out::kCodes) code = cast::e2m1_code_sr_in_block(y, u[j]);
            else q = cast::e2m1_sr_in_block(y, u[j]).value;
        } else if constexpr (Out::kCodes) {
            code = cast::e2m1_code_in_block(y);  // y is NaN only in a non-finite block
        } else {
            q = cast::e2m1_round_in_block(y);
        }
        acc.put(j, code, q, b, finite);
    }
    out.store(copy, blk, acc, b.code);
    return clamped;
}

// *p as the atomics of other CTAs left it, not as this SM's L1 may hold it.
__device__ __forceinline__ std::uint32_t ld_relaxed(const std::uint32_t* p) {
    std::uint32_t v;
    asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p));
    return v;
}

// A CTA's clamped elements per copy and fused amax (zeroed `counts` and `cta_amax` in shared
// memory collect them), added to the launch's totals once per CTA. Every thread calls it.
// `seen`: a value *p.fused_amax held earlier (0: none known); a CTA whose max is not above
// it has nothing to add. Kernels of short-lived CTAs read it as they start, so that of
// thousands of CTAs only the first few queue atomics on the one word.
__device__ __forceinline__ void add_cta_totals(const unsigned (&clamped)[2], std::uint32_t x_amax, const Params& p,
                                               unsigned (&counts)[2], std::uint32_t& cta_amax, std::uint32_t seen = 0) {
    const int t = threadIdx.x;
#pragma unroll
    for (int k = 0; k < 2; ++k) {
        const unsigned s = __reduce_add_sync(0xFFFFFFFFu, clamped[k]);
        if ((t & 31) == 0 && s) atomicAdd(&counts[k], s);
    }
    if (p.fused_amax) {
        const std::uint32_t m = __reduce_max_sync(0xFFFFFFFFu, x_amax);
        if ((t & 31) == 0 && m) atomicMax(&cta_amax, m);
    }
    __syncthreads();
    if (t < 2 && counts[t]) atomicAdd(p.overflow + t, static_cast<unsigned long long>(counts[t]));
    if (t == 0 && p.fused_amax && cta_amax > seen) atomicMax(p.fused_amax, cta_amax);
}

// Resident CTAs per SM the registers are held to: 4 (64 registers) where the cast fits,
// fewer where float32 words in flight or Philox's state need more.
template <class T, int B, bool SR>
constexpr int kMinBlocks = SR || B == 32 ? 2 : (sizeof(T) == 4 ? 3 : 4);

template <class T, int B, bool TwoD, bool SR, class Out>
__global__ void __launch_bounds__(kThreads, kMinBlocks<T, B, SR>)
    fp4_tile_kernel(const T* x, std::int64_t rows, std::int64_t cols, bool vec, Params p, Out out) {
    // Shared tile rows of kC floats plus one pad after every 32: a warp's rowwise stores
    // (8 rows x 4 blocks) and its columnwise reads (32 neighbouring columns) each fall in
    // 32 different banks.
    constexpr int kC = 4 * B, kS = kC + kC / 32;
    __shared__ float tile[kRows * kS];
    __shared__ std::uint32_t tile_amax[TwoD ? 16 : 1];
    __shared__ unsigned counts[2];
    __shared__ std::uint32_t cta_amax;
    const int t = threadIdx.x;
    if (t < 2) counts[t] = 0;
    if (t == 0) cta_amax = 0;
    __shared__ float2 scale_by_code[2][128];  // NVFP4: each copy's {s_b, enc_b} by E4M3 code
    CopyScales row_scales, col_scales;
    if (p.nvfp4) {
        row_scales.s_enc = cast::nvfp4_tensor_scale(*p.amax);
        row_scales.s_dec = 1.0f / row_scales.s_enc;  // IEEE division (no fast math in these files)
        col_scales.s_enc = cast::nvfp4_tensor_scale(*p.col_amax);
        col_scales.s_dec = 1.0f / col_scales.s_enc;
        row_scales.by_code = scale_by_code[0];
        col_scales.by_code = scale_by_code[1];
        scale_by_code[t / 128][t % 128] = nvfp4_scale_entry(t % 128, t < 128 ? row_scales.s_dec : col_scales.s_dec);
    }
    if (blockIdx.x == 0 && t == 0) {
        if (p.row_tensor_scale_inv) *p.row_tensor_scale_inv = row_scales.s_dec;
        if (p.col_tensor_scale_inv) *p.col_tensor_scale_inv = col_scales.s_dec;
        if (p.tensor_scale) *p.tensor_scale = __uint_as_float(cast::kQuietNaNBits);
    }
    __syncthreads();  // the scale table

    // Tiles in row-major order, gridDim.x apart; the next tile's loads are issued before
    // this one is cast, so they are in flight while it computes. A tile's place (row, column
    // of tiles) steps by the grid's without a division per tile.
    const std::int64_t tiles_x = (cols + kC - 1) / kC, tiles_y = (rows + kRows - 1) / kRows;
    const std::int64_t step_y = gridDim.x / tiles_x, step_x = gridDim.x % tiles_x;
    auto advance = [&](std::int64_t& ty, std::int64_t& tx) {
        tx += step_x, ty += step_y;
        if (tx >= tiles_x) tx -= tiles_x, ++ty;
    };
    const int rr = t / 4, rb = t % 4;      // rowwise: row t / 4 of the tile, block t % 4
    const int cc = t % kC, cb = t / kC;    // columnwise: column t % 4B, rows B (t / 4B) on
    // Where they lie in the tile: a block never straddles a pad (B divides 32 or is 32).
    const int row_at = rr * kS + rb * B + rb * B / 32, col_at = cb * B * kS + cc + cc / 32;
    unsigned clamped[2] = {0, 0};
    std::uint32_t x_amax = 0;  // of the finite and infinite elements (NaN ignored)
    std::int64_t ty = blockIdx.x / tiles_x, tx = blockIdx.x % tiles_x;
    PendingRaw<T, B> next{};
    if (ty < tiles_y) next = issue_raw<T, B>(x, rows, cols, ty * kRows + rr, tx * kC + rb * B, vec);
    for (; ty < tiles_y; advance(ty, tx)) {
        const std::int64_t r0 = ty * kRows, c0 = tx * kC;
        const std::int64_t gr = r0 + rr, gc = c0 + rb * B;
        {
            float v[B];
            unpack<T, B>(finish_raw<T, B>(next), v);
            std::int64_t ny = ty, nx = tx;
            advance(ny, nx);
            if (ny < tiles_y) next = issue_raw<T, B>(x, rows, cols, ny * kRows + rr, nx * kC + rb * B, vec);
#pragma unroll
            for (int j = 0; j < B; ++j) tile[row_at + j] = v[j];
            if (p.fused_amax) {
#pragma unroll
                for (int j = 0; j < B; ++j) {
                    const std::uint32_t e = __float_as_uint(v[j]) & ~cast::kSignBit;
                    x_amax = e <= cast::kInfBits ? max(x_amax, e) : x_amax;
                }
            }
            if (!TwoD && p.rowwise) {  // every lane: the stores pair lanes up (n 0 outside x)
                const bool in = gr < rows && gc < cols;
                const Block blk{gr, gc, rows, cols, in ? int(cols - gc < B ? cols - gc : B) : 0, in,
                                std::uint64_t(gr * cols + gc), 1};
                clamped[0] += cast_block<B, SR>(v, amax_bits<B>(v), p, row_scales, p.key, blk, out, 0);
            }
        }
        __syncthreads();

        const std::int64_t gcc = c0 + cc, grr = r0 + cb * B;
        {
            float w[B];
#pragma unroll
            for (int j = 0; j < B; ++j) w[j] = tile[col_at + j * kS];
            std::uint32_t a = amax_bits<B>(w);
            if constexpr (TwoD) {  // B == 16: the 16x16 tile (cb, cc / 16) is this half warp's
                const std::uint32_t m = half_warp_max(a);
                if ((t & 15) == 0) tile_amax[cb * 4 + cc / 16] = m;
            }
            if (p.rht) {
#pragma unroll
                for (int h = 0; h < B / 16; ++h)
                    if (grr + 16 * (h + 1) <= rows) cast::rht16(w + 16 * h);
                a = amax_bits<B>(w);
            }
            if constexpr (TwoD) a = half_warp_max(a);  // p.rht: of the transformed tile, else the same as above
            if (p.columnwise) {
                // 16x16 tiles without rht: the transpose of the rowwise copy, bit for bit,
                // sr bits included (Transformer Engine's 2D weight layout); otherwise a
                // cast of its own, drawing with tensor | 1 at its own indices.
                const bool transpose = TwoD && !p.rht, in = gcc < cols && grr < rows;
                const Block blk{gcc, grr, cols, rows, in ? int(rows - grr < B ? rows - grr : B) : 0,
                                in && (!TwoD || (gcc & 15) == 0),
                                std::uint64_t(transpose ? grr * cols + gcc : gcc * rows + grr),
                                std::uint64_t(transpose ? cols : 1)};
                const cast::RoundingKey key = transpose ? p.key : cast::columnwise_key(p.key);
                clamped[1] += cast_block<B, SR>(w, a, p, col_scales, key, blk, out, 1);
            }
        }

        if constexpr (TwoD) {  // rowwise 16x16 tiles under the amax the columnwise pass found
            __syncthreads();
            if (p.rowwise) {
                float v[B];
#pragma unroll
                for (int j = 0; j < B; ++j) v[j] = tile[row_at + j];
                const bool in = gr < rows && gc < cols;
                const Block blk{gr, gc, rows, cols, in ? int(cols - gc < B ? cols - gc : B) : 0, in && (gr & 15) == 0,
                                std::uint64_t(gr * cols + gc), 1};
                clamped[0] += cast_block<B, SR>(v, tile_amax[(rr / 16) * 4 + rb], p, row_scales, p.key, blk, out, 0);
            }
        }
        __syncthreads();  // the tile is rewritten next round
    }

    add_cta_totals(clamped, x_amax, p, counts, cta_amax);
}

// Launches the kernel over all of x (T float or uint16, the BF16 bits; B 16 or 32): as
// many CTAs as fit on the device at once, each looping over its tiles.
template <class T, int B, bool TwoD, bool SR, class Out>
void launch_tiles(const CastInput& x, const Params& p, const Out& out, cudaStream_t stream) {
    static const int per_sm = [] {
        int n = 0;
        FP8SCOPE_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, fp4_tile_kernel<T, B, TwoD, SR, Out>,
                                                                          kThreads, 0));
        return std::max(1, n);
    }();
    const std::int64_t resident = std::int64_t(per_sm) * qk::sm_count();
    const std::int64_t tiles = (x.cols + 4 * B - 1) / (4 * B) * ((x.rows + kRows - 1) / kRows);
    const unsigned grid = unsigned(std::min<std::int64_t>(tiles, resident));
    const bool vec = x.cols % (16 / sizeof(T)) == 0 && reinterpret_cast<std::uintptr_t>(x.data) % 16 == 0;
    fp4_tile_kernel<T, B, TwoD, SR, Out>
        <<<grid, kThreads, 0, stream>>>(static_cast<const T*>(x.data), x.rows, x.cols, vec, p, out);
}

// The instantiation a recipe needs: input type, block (16, 32 or 16x16 tiles), sr.
template <class Out>
void dispatch_tiles(const CastInput& x, const Recipe& recipe, const Params& p, const Out& out, cudaStream_t stream) {
    const auto* nv = std::get_if<NVFP4Scaling>(&recipe);
    const bool two_d = nv && nv->two_d, sr = nv ? nv->sr : std::get<MXFP4Scaling>(recipe).sr;
    const bool bf16 = x.dtype == DType::BF16;
    auto by_type = [&](auto b, auto two, auto s) {
        constexpr int kB = decltype(b)::value;
        constexpr bool kTwo = decltype(two)::value, kSR = decltype(s)::value;
        bf16 ? launch_tiles<std::uint16_t, kB, kTwo, kSR>(x, p, out, stream)
             : launch_tiles<float, kB, kTwo, kSR>(x, p, out, stream);
    };
    using I16 = std::integral_constant<int, 16>;
    using I32 = std::integral_constant<int, 32>;
    using Yes = std::true_type;
    using No = std::false_type;
    if (!nv) sr ? by_type(I32{}, No{}, Yes{}) : by_type(I32{}, No{}, No{});
    else if (two_d) sr ? by_type(I16{}, Yes{}, Yes{}) : by_type(I16{}, Yes{}, No{});
    else sr ? by_type(I16{}, No{}, Yes{}) : by_type(I16{}, No{}, No{});
}

}  // namespace fp8scope::cuda::fp4k
