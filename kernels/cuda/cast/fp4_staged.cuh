// The FP4 training cast's kernel for BF16 input of 16-byte rows (the GEMM operands of real
// models): the same copies, bit for bit, as fp4_tile.cuh's kernel, with fewer instructions
// per element and the memory schedule of a plain copy. With stochastic rounding (four CTAs
// per SM for Philox's registers) the generator's ~16 instructions per element and copy
// bound it: 32-36% of the copy on an H200, 25-35% in fp4_tile.cuh.
//
// Short-lived CTAs, one per two neighbouring tiles of 32 rows x 128 columns, as many resident
// as fit: that is the schedule of the fastest plain copy to one straight and one transposed
// output measured on an H200 (tiles of 32 x 128: 86% of the copy bandwidth; 64-row tiles
// 77%; persistent CTAs looping over tiles 65-77%, whatever the depth of their cp.async
// pipeline). Around it, on an H200 (8192 x 8192), each worth 1-5 points of the copy:
// - six CTAs per SM (40 registers) in place of four: more loads in flight behind the
//   instructions of each element (five: the same as six; with rht five: six, which fit only
//   with spills or with the rowwise totals reduced early, measured slower);
// - tiles from x's end back: the kernel before (the amax pass, or what wrote x) left x's
//   end in L2, where the first CTAs find it; NVFP4's cast is launched as a dependent of its
//   amax pass, so its first CTAs start loading before that pass ends;
// - streaming stores (st.global.cs): the copies are not read back here, and L2 keeps x;
// - the E2M1 rounding with neither clamp nor per-element sign where a block cannot reach 7
//   (cast_word), which leaves the integer pipe, the busiest, a third fewer instructions.
// Each CTA:
//   1. Thread t loads the 16-byte words (8 BF16) of rows t / 16 and t / 16 + 16 at word
//      t % 16 of both tiles, all four before anything waits for them: a warp reads whole
//      256-byte rows. It casts them to the rowwise copy (B / 8 neighbouring lanes share a
//      block and its amax), stores them there, and puts them in shared memory.
//   2. Per tile, thread (pair, seg) casts 8 rows (8 seg on) of columns 2 pair and 2 pair + 1
//      (one 4-byte read per row gives both; B / 8 neighbouring lanes share a block) and
//      stores each column's 8 values as one word of x^T's row: a warp's four segs write
//      64 bytes of each of 16 rows of the columnwise copy.
//   With rht, step 2 is columnwise_rht's: a thread transforms 16 rows of a column, and lane
//   pairs swap words through shared memory so that every store writes whole sectors. With
//   16 x 16 tiles, each tile's amax is gathered in shared memory between the two steps, and
//   both copies take it (add_tile_amax).
// Shared memory rows are unpadded; the 16-byte word w of row r sits at w ^ (2 ((r / 8) % 4)),
// so that both phases fall in 32 different banks.
// Block amaxes are taken on the BF16 bits, two elements per instruction (max.u16x2 of the
// magnitudes: NaN lies above Inf there too), and widen to float32 bits exactly.
// Rows and columns must be multiples of 8 (whole 16-byte words of both copies); a tile
// reaching past x loads zeros there, which change no block amax, and stores nothing there.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "cuda/cast/fp4_tile.cuh"
#include "cuda/runtime/dependent_launch.cuh"

namespace fp8scope::cuda::fp4k {

constexpr int kStagedRows = 32, kStagedCols = 128, kStagedThreads = 256;
// Tiles side by side per CTA (32 x 256 of x): one or four measured 9-19% slower on an H200.
constexpr int kTilesPerCta = 2, kStagedMinBlocks = 6, kStagedRhtMinBlocks = 5, kStagedSrMinBlocks = 4;
constexpr int kStagedWords = kStagedCols / 8;  // 16-byte words per tile row

// Per 16-bit half: the larger of the two as unsigned integers.
__device__ __forceinline__ std::uint32_t max_u16x2(std::uint32_t a, std::uint32_t b) {
    std::uint32_t r;
    asm("max.u16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
    return r;
}

constexpr std::uint32_t kMagnitudes2 = 0x7FFF7FFFu;

// The larger of a and b, NaN where either is (one instruction, as fmaxf).
__device__ __forceinline__ float max_nan(float a, float b) {
    float r;
    asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
    return r;
}

// The float32 bits of the larger magnitude of a max_u16x2 result's two halves.
__device__ __forceinline__ std::uint32_t wider_half(std::uint32_t m) { return max(m & 0xFFFFu, m >> 16) << 16; }

// max_u16x2 over the L neighbouring lanes that share a block (L a power of two).
template <int L>
__device__ __forceinline__ std::uint32_t lanes_max(std::uint32_t m) {
#pragma unroll
    for (int k = 1; k < L; k *= 2) m = max_u16x2(m, __shfl_xor_sync(kAllLanes, m, k));
    return m;
}

// Where 16-byte word w of tile row r lies in shared memory (in 16-byte words).
__device__ __forceinline__ int staged_slot(int r, int w) { return r * kStagedWords + (w ^ (((r >> 3) & 3) << 1)); }

// The element j of 8 BF16 held as pairs in w (element 2 i low in w[i]), as float32.
__device__ __forceinline__ float pair_element(const std::uint32_t (&w)[4], int j) {
    return __uint_as_float(j & 1 ? w[j / 2] & 0xFFFF0000u : w[j / 2] << 16);
}

// The 8 elements a word of a copy is cast from: element(j) = raw(j) * quarter (exactly),
// and the sign bits of elements 2 k and 2 k + 1 where a BF16 pair has them.
struct Bf16Elements {  // x itself, as pairs
    static constexpr bool kQuartered = false;
    const std::uint32_t (&w)[4];
    __device__ __forceinline__ float raw(int j) const { return pair_element(w, j); }
    __device__ __forceinline__ float element(int j) const { return raw(j); }
    __device__ __forceinline__ std::uint32_t signs(int k) const { return w[k] & 0x80008000u; }
};

struct F32Elements {  // rht's transformed columns: rht16_times4's, quarter 1/4 (1 in a tail)
    static constexpr bool kQuartered = true;
    const float* v;
    float quarter;
    __device__ __forceinline__ float raw(int j) const { return v[j]; }
    __device__ __forceinline__ float element(int j) const { return cast::mul_rn(v[j], quarter); }
    __device__ __forceinline__ std::uint32_t signs(int k) const {
        return __byte_perm(__float_as_uint(v[2 * k]), __float_as_uint(v[2 * k + 1]), 0x7632) & 0x80008000u;
    }
};

// Casts 8 W elements of a block with amax bits `amax` and scale b (block_scale's) to BF16
// values decode(q) * s_b, W 16-byte words; adds to `clamped` the finite elements clamped
// to +-6 (cast_block's rule) where Count: MXFP4 RCEIL never clamps a finite element
// (amax_b <= 6 x 2^e, and a finite amax_b is below 6 x 2^127), so it counts nothing.
// |x enc| <= amax_b enc (products round monotonically): where that is below 7, as in every
// finite block but those of tiny NVFP4 scales, no element needs the clamp, the count runs
// on the FMA pipe, and the signs go back on two elements at a time. Else (a block holding
// NaN or Inf among them, whose s_b is NaN) element by element, clamp and all. A quarter
// goes into enc there where that stays exact (enc_b >= 2^-124, all but blocks of a tensor
// amax near FLT_MAX): (raw / 4) enc_b and raw (enc_b / 4) are then one exact product.
// With stochastic rounding (u: the elements' Philox words), element by element as
// fp4_tile.cuh's cast_block: e2m1_sr_in_block, the count where amax_b enc passes 6.
template <bool Count, bool SR = false, int W, class In>
__device__ __forceinline__ void cast_words(const In& in, std::uint32_t amax, const cast::FP4BlockScale& b,
                                           float& clamped, uint4 (&out)[W], const std::uint32_t* u = nullptr) {
    std::uint32_t o[4 * W];
    if constexpr (SR) {
        const bool count = Count && amax < cast::kInfBits && cast::mul_rn(cast::float_of(amax), b.enc) > cast::kE2M1Max;
        auto value = [&](int j) {
            const float y = cast::mul_rn(in.element(j), b.enc);
            if (count) clamped += (__float_as_uint(y) & ~cast::kSignBit) > cast::kE2M1MaxBits ? 1.0f : 0.0f;
            return __float_as_uint(cast::mul_rn(cast::e2m1_sr_in_block(y, u[j]).value, b.scale));
        };
#pragma unroll
        for (int k = 0; k < 4 * W; ++k) o[k] = __byte_perm(value(2 * k), value(2 * k + 1), 0x7632);
    } else if (cast::mul_rn(cast::float_of(amax), b.enc) < 7.0f && (!In::kQuartered || b.enc >= 0x1p-124f)) {
        float enc = b.enc;
        if constexpr (In::kQuartered) enc = cast::mul_rn(enc, in.quarter);
        auto value = [&](int j) {  // exact: the product's top half is the BF16
            const float y = cast::mul_rn(in.raw(j), enc);
            if constexpr (Count) clamped += cast::e2m1_clamped_indicator(y);
            return __float_as_uint(cast::mul_rn(cast::e2m1_round_magnitude_below7(y), b.scale));
        };
#pragma unroll
        for (int k = 0; k < 4 * W; ++k) o[k] = __byte_perm(value(2 * k), value(2 * k + 1), 0x7632) | in.signs(k);
    } else {
        const bool count = Count && amax < cast::kInfBits;
        auto value = [&](int j) {
            const float y = cast::mul_rn(in.element(j), b.enc);
            if (count) clamped += fabsf(y) > cast::kE2M1Max ? 1.0f : 0.0f;
            return __float_as_uint(cast::mul_rn(cast::e2m1_round_in_block_fp(y), b.scale));
        };
#pragma unroll
        for (int k = 0; k < 4 * W; ++k) o[k] = __byte_perm(value(2 * k), value(2 * k + 1), 0x7632);
    }
#pragma unroll
    for (int w = 0; w < W; ++w) out[w] = make_uint4(o[4 * w], o[4 * w + 1], o[4 * w + 2], o[4 * w + 3]);
}

template <bool Count, bool SR = false, class In>
__device__ __forceinline__ uint4 cast_word(const In& in, std::uint32_t amax, const cast::FP4BlockScale& b,
                                           float& clamped, const std::uint32_t* u = nullptr) {
    uint4 out[1];
    cast_words<Count, SR>(in, amax, b, clamped, out, u);
    return out[0];
}

// The Philox words of the 8 elements of copy index e0 on (a multiple of 8): two calls.
__device__ __forceinline__ void word_bits(const cast::RoundingKey& key, std::uint64_t e0, std::uint32_t (&u)[8]) {
    rounding_run<8>(key, e0, 1, u);
}

// The largest |x| of a thread's 8 elements w, NaN ignored (what a fused amax keeps): the
// block's amax where that is no NaN, else element by element.
__device__ __forceinline__ std::uint32_t finite_or_inf_amax(const std::uint32_t (&w)[4], std::uint32_t amax) {
    if (amax <= cast::kInfBits) return amax;
    std::uint32_t m = 0;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
        const std::uint32_t e = __float_as_uint(pair_element(w, j)) & ~cast::kSignBit;
        m = e <= cast::kInfBits ? max(m, e) : m;
    }
    return m;
}

using StagedTiles = uint4[kTilesPerCta][kStagedRows * kStagedWords];

// Step 2 with rht (the columnwise copy of a wgrad operand): thread t casts rows 16 (t % 2)
// on of column t / 2 of each tile (per row a warp reads 32 bytes of rows j and 16 + j, in
// different halves of the banks), runs cast::rht16_times4 down the column where its 16
// rows are all inside x (a tail stays as it is, as in fp4_tile.cuh), casts them under one
// block scale with the quarter in enc, and the 16 values become two words of x^T's row.
// An MXFP4 block (32 rows) is lanes t and t ^ 1. One 2-byte read per element measured
// faster than a thread taking two columns from 4-byte reads (mxfp4_rceil:rht=1 62% against
// 60% of the copy).
template <int B, bool Count, bool SR>
__device__ __forceinline__ void columnwise_rht(const StagedTiles& tile, std::int64_t r0, std::int64_t c0,
                                               std::int64_t rows, std::int64_t cols, const Params& p,
                                               const CopyScales& s, std::uint16_t* col_out, float& clamped,
                                               std::uint32_t& x_amax) {
    // The words lane pairs swap before they store them: word i of thread t at
    // i (kStagedThreads + 1) + t (the pad puts the two words of a read in different banks).
    __shared__ uint4 xchg[2 * (kStagedThreads + 1)];
    const int t = threadIdx.x, c = t / 2, g = t % 2;
    const std::int64_t r = r0 + 16 * g;
    const bool full = r + 16 <= rows;
#pragma unroll 1  // one tile at a time (both tiles unrolled measured 6% slower)
    for (int k = 0; k < kTilesPerCta; ++k) {
        const std::uint16_t* halves = reinterpret_cast<const std::uint16_t*>(tile[k]);
        float y[16];
#pragma unroll
        for (int j = 0; j < 16; ++j) {
            const std::uint32_t b = halves[8 * staged_slot(16 * g + j, c / 8) + c % 8];
            if (p.fused_amax && !p.rowwise) {  // of x itself, NaN ignored
                const std::uint32_t e = (b << 16) & ~cast::kSignBit;
                x_amax = e <= cast::kInfBits ? max(x_amax, e) : x_amax;
            }
            y[j] = __uint_as_float(b << 16);
        }
        if (full) cast::rht16_times4(y);
        const float quarter = full ? 0.25f : 1.0f;
        float m[8];  // a tree, not a chain; NaN wins, as in the bits' max of the other copies
#pragma unroll
        for (int j = 0; j < 8; ++j) m[j] = max_nan(fabsf(y[j]), fabsf(y[j + 8]));
#pragma unroll
        for (int h = 4; h > 0; h /= 2)
#pragma unroll
            for (int j = 0; j < h; ++j) m[j] = max_nan(m[j], m[j + h]);
        std::uint32_t a = __float_as_uint(m[0] * quarter);  // exact (cast::rht16_times4)
        if constexpr (B == 32) a = max(a, __shfl_xor_sync(kAllLanes, a, 1));
        const std::int64_t cc = c0 + k * kStagedCols + c;
        if constexpr (SR) {  // a word at a time: its Philox words and 8 values
            const cast::FP4BlockScale b = block_scale(a, p, s);
#pragma unroll
            for (int i = 0; i < 2; ++i) {
                std::uint32_t u[8];
                word_bits(cast::columnwise_key(p.key), std::uint64_t(cc * rows + r + 8 * i), u);
                const F32Elements in{y + 8 * i, quarter};
                xchg[i * (kStagedThreads + 1) + t] = cast_word<Count, true>(in, a, b, clamped, u);
            }
        } else {
            uint4 words[2];  // one block, one scale
            cast_words<Count>(F32Elements{y, quarter}, a, block_scale(a, p, s), clamped, words);
#pragma unroll
            for (int i = 0; i < 2; ++i) xchg[i * (kStagedThreads + 1) + t] = words[i];
        }
        __syncwarp();
        // Store h writes the 32 bytes (one sector) of rows 16 h on: lane g the word g of
        // lane 2 c + h's. A lane storing both of its own words would leave every sector
        // half written twice, and the L2 a third more store requests.
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const uint4 out = xchg[g * (kStagedThreads + 1) + (t & ~1) + h];
            const std::int64_t rh = r0 + 16 * h + 8 * g;
            if (cc < cols && rh < rows) __stcs(reinterpret_cast<uint4*>(col_out + cc * rows + rh), out);
        }
        __syncwarp();  // xchg is rewritten next tile
    }
}

// What the columnwise copy is: x^T cast in 1-D blocks, x^T through rht16 first, or (NVFP4's
// 16 x 16 tiles, Transformer Engine's weight layout) x^T under each tile's amax, which is
// the rowwise copy transposed, bit for bit.
enum class StagedCopy { Blocks, Rht, Tiles };

// The word magnitudes' max over a 16 x 16 tile of x: the two words of its columns in each
// of the rows a warp holds, then the eight warps through shared memory (atomicMax into
// zeroed tile_amax by the lane of the tile's first word in the warp's first row).
__device__ __forceinline__ void add_tile_amax(std::uint32_t m, int t, std::uint32_t* tile_amax) {
    m = max_u16x2(m, __shfl_xor_sync(kAllLanes, m, 1));   // the tile's other word
    m = max_u16x2(m, __shfl_xor_sync(kAllLanes, m, 16));  // the warp's other row
    if ((t & 17) == 0) atomicMax(tile_amax, wider_half(m));
}

template <int B, bool Count, StagedCopy C, bool SR>
__global__ void __launch_bounds__(kStagedThreads, SR ? kStagedSrMinBlocks
                                                     : (C == StagedCopy::Rht ? kStagedRhtMinBlocks : kStagedMinBlocks))
    fp4_staged_kernel(const std::uint16_t* x, std::int64_t rows, std::int64_t cols, unsigned ctas_x, Params p,
                      std::uint16_t* row_out, std::uint16_t* col_out) {
    constexpr int kLanes = B / 8;  // lanes per block in both phases
    __shared__ StagedTiles tile;
    __shared__ float2 scale_by_code[2][128];
    __shared__ float2 tensor_scales[2];  // (S_enc, S_dec) of the rowwise and the columnwise copy
    __shared__ unsigned counts[2];
    __shared__ std::uint32_t cta_amax;
    constexpr bool kTiles = C == StagedCopy::Tiles;
    // Per tile k: 16 x 16 tiles (h, cg) of rows 16 h on, columns 16 cg on, at 16 k + 8 h + cg.
    __shared__ std::uint32_t tile_amax[kTiles ? 16 * kTilesPerCta : 1];
    const int t = threadIdx.x;
    // Tiles from x's end back: the kernel before (the amax pass, or what wrote x) left
    // x's end in L2, where the first CTAs find it. ctas_x (CTAs per row of tiles) is
    // 32-bit: a 64-bit division is a long subroutine ahead of every load.
    const unsigned cta = gridDim.x - 1 - blockIdx.x;
    const std::int64_t r0 = std::int64_t(cta / ctas_x) * kStagedRows,
                       c0 = std::int64_t(cta % ctas_x) * (kTilesPerCta * kStagedCols);
    // 1. Rows t / 16 and t / 16 + 16, word t % 16: x's loads go first, so that the CTA's
    // other waits (the tensor amax, the scale table) overlap theirs.
    const int w = t % kStagedWords;
    auto row = [&](int h) { return r0 + t / kStagedWords + 16 * h; };  // of x, words h = 0, 1
    auto col = [&](int k) { return c0 + k * kStagedCols + 8 * w; };    // ... of tile k
    uint4 q[kTilesPerCta][2];
#pragma unroll
    for (int k = 0; k < kTilesPerCta; ++k)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const std::int64_t r = row(h), c = col(k);
            q[k][h] = r < rows && c < cols ? __ldg(reinterpret_cast<const uint4*>(x + r * cols + c)) : make_uint4(0, 0, 0, 0);
        }
    wait_prior_grid();  // NVFP4: the amax pass's tensor amax (x itself it leaves alone)
    const std::uint32_t seen = t == 0 && p.fused_amax ? ld_relaxed(p.fused_amax) : 0;
    if (t < 2) counts[t] = 0;
    if (t == 0) cta_amax = 0;
    if (kTiles && t < 16 * kTilesPerCta) tile_amax[t] = 0;
    // Threads 0-127 take the rowwise copy's S_enc, S_dec and table, 128-255 the columnwise
    // copy's: two divisions and an entry each (both copies' scales in every thread were
    // four more divisions ahead of its cast).
    const int copy = t / 128;
    float s_dec = 1.0f;  // MXFP4's
    if (p.nvfp4) {
        const float s_enc = cast::nvfp4_tensor_scale(*(copy ? p.col_amax : p.amax));
        s_dec = 1.0f / s_enc;
        scale_by_code[copy][t % 128] = nvfp4_scale_entry(t % 128, s_dec);
        if (t % 128 == 0) tensor_scales[copy] = make_float2(s_enc, s_dec);
    }
    if (blockIdx.x == 0 && t % 128 == 0) {
        float* tensor_scale_inv = copy ? p.col_tensor_scale_inv : p.row_tensor_scale_inv;
        if (tensor_scale_inv) *tensor_scale_inv = s_dec;
        if (t == 0 && p.tensor_scale) *p.tensor_scale = __uint_as_float(cast::kQuietNaNBits);
    }
#pragma unroll
    for (int k = 0; k < kTilesPerCta; ++k)
#pragma unroll
        for (int h = 0; h < 2; ++h) tile[k][staged_slot(t / kStagedWords + 16 * h, w)] = q[k][h];
    __syncthreads();  // the tile and the scale tables
    CopyScales row_scales, col_scales;
    if (p.nvfp4) {
        row_scales = CopyScales{tensor_scales[0].x, tensor_scales[0].y, scale_by_code[0]};
        col_scales = CopyScales{tensor_scales[1].x, tensor_scales[1].y, scale_by_code[1]};
    }
    auto word_max = [](const std::uint32_t (&v)[4]) {
        return max_u16x2(max_u16x2(v[0] & kMagnitudes2, v[1] & kMagnitudes2), max_u16x2(v[2] & kMagnitudes2, v[3] & kMagnitudes2));
    };
    if constexpr (kTiles) {
#pragma unroll
        for (int k = 0; k < kTilesPerCta; ++k)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const std::uint32_t v[4] = {q[k][h].x, q[k][h].y, q[k][h].z, q[k][h].w};
                add_tile_amax(word_max(v), t, &tile_amax[16 * k + 8 * h + w / 2]);
            }
        __syncthreads();
    }
    float clamped[2] = {0.0f, 0.0f};  // counts, exact: at most 64 per thread
    std::uint32_t x_amax = 0;
    if (p.rowwise) {
#pragma unroll
        for (int k = 0; k < kTilesPerCta; ++k)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const std::uint32_t v[4] = {q[k][h].x, q[k][h].y, q[k][h].z, q[k][h].w};
                const std::uint32_t a =
                    kTiles ? tile_amax[16 * k + 8 * h + w / 2] : wider_half(lanes_max<kLanes>(word_max(v)));
                if (p.fused_amax) x_amax = max(x_amax, finite_or_inf_amax(v, a));
                const std::int64_t r = row(h), c = col(k);
                std::uint32_t u[SR ? 8 : 1];
                if constexpr (SR) word_bits(p.key, std::uint64_t(r * cols + c), u);
                const uint4 out = cast_word<Count, SR>(Bf16Elements{v}, a, block_scale(a, p, row_scales), clamped[0], u);
                if (r < rows && c < cols) __stcs(reinterpret_cast<uint4*>(row_out + r * cols + c), out);
            }
    }
    if (p.columnwise && C == StagedCopy::Rht) {
        columnwise_rht<B, Count, SR>(tile, r0, c0, rows, cols, p, col_scales, col_out, clamped[1], x_amax);
    } else if (p.columnwise) {
        // 2. Warp k: pairs 8k + lane / 4, seg lane % 4.
        const int pair = 8 * (t / 32) + (t % 32) / 4, seg = t % 4;
#pragma unroll
        for (int k = 0; k < kTilesPerCta; ++k) {
            const std::uint32_t* words = reinterpret_cast<const std::uint32_t*>(tile[k]);
            std::uint32_t v[8];
#pragma unroll
            for (int j = 0; j < 8; ++j) v[j] = words[4 * staged_slot(8 * seg + j, pair / 4) + pair % 4];
            std::uint32_t m;  // both columns' block amaxes as BF16 halves, or the tile's (float32 bits)
            if constexpr (kTiles) {
                m = tile_amax[16 * k + 8 * (seg / 2) + pair / 8];
            } else {
                m = v[0] & kMagnitudes2;
#pragma unroll
                for (int j = 1; j < 8; ++j) m = max_u16x2(m, v[j] & kMagnitudes2);
                m = lanes_max<kLanes>(m);
            }
            const std::int64_t r = r0 + 8 * seg;
#pragma unroll
            for (int h = 0; h < 2; ++h) {  // column 2 pair (low halves), then 2 pair + 1
                std::uint32_t w[4];  // the column's 8 rows as pairs
#pragma unroll
                for (int i = 0; i < 4; ++i) w[i] = __byte_perm(v[2 * i], v[2 * i + 1], h ? 0x7632 : 0x5410);
                const std::uint32_t a = kTiles ? m : h ? m & 0xFFFF0000u : m << 16;
                if (p.fused_amax && !p.rowwise) x_amax = max(x_amax, finite_or_inf_amax(w, a));
                const std::int64_t cc = c0 + k * kStagedCols + 2 * pair + h;
                std::uint32_t u[SR ? 8 : 1];
                if constexpr (SR)  // 1-D blocks only: a cast of its own
                    word_bits(cast::columnwise_key(p.key), std::uint64_t(cc * rows + r), u);
                const uint4 out = cast_word<Count, SR>(Bf16Elements{w}, a, block_scale(a, p, col_scales), clamped[1], u);
                if (cc < cols && r < rows) __stcs(reinterpret_cast<uint4*>(col_out + cc * rows + r), out);
            }
        }
    }
    const unsigned clamped_n[2] = {unsigned(clamped[0]), unsigned(clamped[1])};
    add_cta_totals(clamped_n, x_amax, p, counts, cta_amax, seen);
}

inline bool aligned16(const void* q) { return reinterpret_cast<std::uintptr_t>(q) % 16 == 0; }

// Whether x suits the staged schedule (this cast's and rht's amax pass): BF16 of whole
// 16-byte words, aligned.
inline bool staged_input(const CastInput& x) {
    return x.dtype == DType::BF16 && x.rows % 8 == 0 && x.cols % 8 == 0 && aligned16(x.data);
}

// The staged schedule's grid: CTAs (one per two neighbouring tiles) per row of tiles, and
// in all.
struct StagedGrid {
    unsigned ctas_x, ctas;
};

inline StagedGrid staged_grid(const CastInput& x) {
    const std::int64_t ctas_x = (x.cols + kTilesPerCta * kStagedCols - 1) / (kTilesPerCta * kStagedCols);
    return {unsigned(ctas_x), unsigned(ctas_x * ((x.rows + kStagedRows - 1) / kStagedRows))};
}

// Whether the staged kernel casts x for this recipe: a staged input and whole 16-byte
// words in both copies; 16 x 16 tiles only without rht and sr.
inline bool staged_fits(const CastInput& x, bool two_d, bool rht, bool sr, const void* row_out, const void* col_out) {
    return staged_input(x) && !(two_d && (rht || sr)) && aligned16(row_out) && aligned16(col_out);
}

template <int B, bool Count, StagedCopy C, bool SR>
void launch_staged_as(const CastInput& x, const Params& p, std::uint16_t* row_out, std::uint16_t* col_out, cudaStream_t stream) {
    const StagedGrid g = staged_grid(x);
    // NVFP4 follows its amax pass, which only reads x: the cast's CTAs may start in its tail
    // and load their tiles while it finishes.
    auto kernel = fp4_staged_kernel<B, Count, C, SR>;
    const auto* data = static_cast<const std::uint16_t*>(x.data);
    if (p.nvfp4)
        launch_dependent(kernel, g.ctas, kStagedThreads, 0, stream, data, x.rows, x.cols, g.ctas_x, p, row_out, col_out);
    else
        kernel<<<g.ctas, kStagedThreads, 0, stream>>>(data, x.rows, x.cols, g.ctas_x, p, row_out, col_out);
}

// NVFP4 (blocks of 16, or 16 x 16 tiles) or MXFP4 (32), round to nearest or (1-D blocks)
// stochastic rounding.
inline void launch_staged(const CastInput& x, const Params& p, bool two_d, bool sr, std::uint16_t* row_out,
                          std::uint16_t* col_out, cudaStream_t stream) {
    auto launch = [&](auto copy, auto stochastic) {
        constexpr StagedCopy kC = decltype(copy)::value;
        constexpr bool kSR = decltype(stochastic)::value;
        if constexpr (kC == StagedCopy::Tiles) {  // NVFP4's only, round to nearest
            launch_staged_as<16, true, kC, false>(x, p, row_out, col_out, stream);
        } else {
            if (p.nvfp4) launch_staged_as<16, true, kC, kSR>(x, p, row_out, col_out, stream);
            else if (p.rule == MXRule::RCeil) launch_staged_as<32, false, kC, kSR>(x, p, row_out, col_out, stream);
            else launch_staged_as<32, true, kC, kSR>(x, p, row_out, col_out, stream);
        }
    };
    auto with = [&](auto copy) {
        if (sr) launch(copy, std::true_type{});
        else launch(copy, std::false_type{});
    };
    if (two_d) launch(std::integral_constant<StagedCopy, StagedCopy::Tiles>{}, std::false_type{});
    else if (p.rht && col_out) with(std::integral_constant<StagedCopy, StagedCopy::Rht>{});
    else with(std::integral_constant<StagedCopy, StagedCopy::Blocks>{});
}

}  // namespace fp8scope::cuda::fp4k
