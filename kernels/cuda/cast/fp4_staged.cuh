// The FP4 training cast's kernel for BF16 input of 16-byte rows (the GEMM operands of real
// models): the same copies, bit for bit, as fp4_tile.cuh's kernel, with fewer instructions
// per element, which is what bounds that kernel.
//
// A CTA loops over tiles of 64 rows x 128 columns. Each tile goes through shared memory
// three times, always in 16-byte words and whole 128-byte lines towards global memory:
//   1. x's tile is loaded by whole rows into `in`, BF16 as it is, asynchronously (cp.async:
//      the next tile's loads are in flight while this one is cast);
//   2. each thread casts 32 elements of a row (16-byte reads of `in`) into `outr` and 16
//      rows of two neighbouring columns (one 4-byte read per row gives both) into `outc`,
//      x^T's tile;
//   3. `outr` and `outc` go out by whole rows of their copies.
// Block amaxes are taken on the BF16 bits, two elements per instruction (max.u16x2 of the
// magnitudes: NaN lies above Inf there too), and widen to float32 bits exactly.
// Rows and columns must be multiples of 8 (whole 16-byte words of both copies); a tile
// reaching past x loads zeros there, which change no block amax, and stores nothing there.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/cast/fp4_tile.cuh"

namespace fp8scope::cuda::fp4k {

constexpr int kStagedRows = 64, kStagedCols = 128;
constexpr int kInStride = kStagedCols + 8;   // BF16 per `in` / `outr` row: 16 B of pad moves each row by 4 banks
constexpr int kColStride = kStagedRows + 8;  // BF16 per `outc` row (a column of the tile)
// 256 threads: a thread casts 32 elements of the rowwise copy (32 / B blocks of a row) and
// 16 rows of two neighbouring columns for the columnwise copy (B / 16 threads, neighbouring
// lanes, share a block and its amax).
constexpr int kStagedThreads = 256;
constexpr int kInTile = kStagedRows * kInStride;  // BF16 of one `in` / `outr` buffer
// Two buffers of x's tiles (one in flight while the other is cast; more measured no faster),
// two CTAs per SM (the registers of a whole tile's casts without spills).
constexpr int kStages = 2, kStagedMinBlocks = 2;
constexpr int kStagedSmem = ((kStages + 1) * kInTile + kStagedCols * kColStride) * 2 + 2 * 128 * int(sizeof(float2));

// x's 16-byte word at src into shared memory at dst, asynchronously (cp.async, L1 bypassed);
// zeros where `inside` is false.
__device__ __forceinline__ void load_async(void* dst, const void* src, bool inside) {
    const unsigned at = static_cast<unsigned>(__cvta_generic_to_shared(dst));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(at), "l"(src), "r"(inside ? 16 : 0));
}
__device__ __forceinline__ void commit_loads() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void wait_loads() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

// Per 16-bit half: the larger of the two as unsigned integers.
__device__ __forceinline__ std::uint32_t max_u16x2(std::uint32_t a, std::uint32_t b) {
    std::uint32_t r;
    asm("max.u16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
    return r;
}

constexpr std::uint32_t kMagnitudes2 = 0x7FFF7FFFu;

// The float32 bits of the larger magnitude of a max_u16x2 result's two halves.
__device__ __forceinline__ std::uint32_t wider_half(std::uint32_t m) { return max(m & 0xFFFFu, m >> 16) << 16; }

// Casts the N elements get(0), ..., get(N - 1) under block amax bits `amax` to BF16 values
// decode(q) * s_b, stored at dst (16-byte aligned) eight at a time; returns the finite
// elements clamped to +-6 (cast_block's rule) where Count: MXFP4 RCEIL never clamps a finite
// element (amax_b <= 6 x 2^e, and a finite amax_b is below 6 x 2^127), so it counts nothing.
template <int N, bool Count, class Get>
__device__ __forceinline__ unsigned cast_run(const Get& get, std::uint32_t amax, const Params& p, const CopyScales& s,
                                             std::uint16_t* dst) {
    const cast::FP4BlockScale b = block_scale(amax, p, s);
    const bool count = Count && amax < cast::kInfBits && cast::mul_rn(cast::float_of(amax), b.enc) > cast::kE2M1Max;
    unsigned clamped = 0;
    auto value = [&](int j) {  // exact: the product's top half is the BF16
        const float y = cast::mul_rn(get(j), b.enc);
        if (count) clamped += fabsf(y) > cast::kE2M1Max ? 1u : 0u;
        return __float_as_uint(cast::mul_rn(cast::e2m1_round_in_block_fp(y), b.scale));
    };
#pragma unroll
    for (int g = 0; g < N / 8; ++g) {
        std::uint32_t o[4];
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            const std::uint32_t lo = value(8 * g + 2 * k), hi = value(8 * g + 2 * k + 1);
            o[k] = __byte_perm(lo, hi, 0x7632);
        }
        *reinterpret_cast<uint4*>(dst + 8 * g) = make_uint4(o[0], o[1], o[2], o[3]);
    }
    return clamped;
}

// The largest |x| of a run, NaN ignored (what a fused amax keeps): its amax where that is
// no NaN, else element by element.
template <int N, class Get>
__device__ __forceinline__ std::uint32_t finite_or_inf_amax(const Get& get, std::uint32_t amax) {
    if (amax <= cast::kInfBits) return amax;
    std::uint32_t m = 0;
#pragma unroll
    for (int j = 0; j < N; ++j) {
        const std::uint32_t e = __float_as_uint(get(j)) & ~cast::kSignBit;
        m = e <= cast::kInfBits ? max(m, e) : m;
    }
    return m;
}

template <int B, bool Count>
__global__ void __launch_bounds__(kStagedThreads, kStagedMinBlocks)
    fp4_staged_kernel(const std::uint16_t* x, std::int64_t rows, std::int64_t cols, Params p, std::uint16_t* row_out,
                      std::uint16_t* col_out) {
    constexpr int kT = kStagedThreads;
    constexpr int kChunks = kStagedRows * kStagedCols / 8 / kT;  // 16-byte words per thread of a tile
    constexpr int kPerRow = kStagedCols / 8;                      // ... of one row of `in`
    constexpr int kRowThreads = kStagedCols / 32;                 // threads per row of the rowwise pass
    constexpr int kSegs = B / 16;                                 // threads per columnwise block
    extern __shared__ uint4 smem[];
    std::uint16_t* ins = reinterpret_cast<std::uint16_t*>(smem);  // kStages buffers of x's tiles
    std::uint16_t* outr = ins + kStages * kInTile;
    std::uint16_t* outc = outr + kInTile;
    float2* scale_by_code = reinterpret_cast<float2*>(outc + kStagedCols * kColStride);  // [2][128]
    __shared__ unsigned counts[2];
    __shared__ std::uint32_t cta_amax;
    const int t = threadIdx.x;
    if (t < 2) counts[t] = 0;
    if (t == 0) cta_amax = 0;
    CopyScales row_scales, col_scales;
    if (p.nvfp4) {
        row_scales.s_enc = cast::nvfp4_tensor_scale(*p.amax);
        row_scales.s_dec = 1.0f / row_scales.s_enc;
        col_scales.s_enc = cast::nvfp4_tensor_scale(*p.col_amax);
        col_scales.s_dec = 1.0f / col_scales.s_enc;
        row_scales.by_code = scale_by_code;
        col_scales.by_code = scale_by_code + 128;
        for (int i = t; i < 256; i += kT) scale_by_code[i] = nvfp4_scale_entry(i % 128, i < 128 ? row_scales.s_dec : col_scales.s_dec);
    }
    if (blockIdx.x == 0 && t == 0) {
        if (p.row_tensor_scale_inv) *p.row_tensor_scale_inv = row_scales.s_dec;
        if (p.col_tensor_scale_inv) *p.col_tensor_scale_inv = col_scales.s_dec;
        if (p.tensor_scale) *p.tensor_scale = __uint_as_float(cast::kQuietNaNBits);
    }

    const std::int64_t tiles_x = (cols + kStagedCols - 1) / kStagedCols, tiles_y = (rows + kStagedRows - 1) / kStagedRows;
    const std::int64_t step_y = gridDim.x / tiles_x, step_x = gridDim.x % tiles_x;
    auto advance = [&](std::int64_t& ty, std::int64_t& tx) {
        tx += step_x, ty += step_y;
        if (tx >= tiles_x) tx -= tiles_x, ++ty;
    };
    // Word k of this thread in a tile: row (t + k kT) / kPerRow, 8 columns at 8 ((t + k kT) % kPerRow).
    auto load = [&](std::int64_t ty, std::int64_t tx, std::uint16_t* buf) {
#pragma unroll
        for (int k = 0; k < kChunks; ++k) {
            const int i = t + k * kT;
            const std::int64_t r = ty * kStagedRows + i / kPerRow, c = tx * kStagedCols + (i % kPerRow) * 8;
            const bool inside = r < rows && c < cols;
            load_async(buf + (i / kPerRow) * kInStride + (i % kPerRow) * 8, inside ? x + r * cols + c : x, inside);
        }
    };
    const int rr = t / kRowThreads, rb = t % kRowThreads;  // rowwise: row; blocks rb, rb + kRowThreads, ...
    // columnwise: columns 2cp, 2cp + 1; rows 16 seg on of block cb (rows B cb on)
    const int seg = t % kSegs, cp = (t / kSegs) % (kStagedCols / 2), cb = t / (kSegs * kStagedCols / 2);
    unsigned clamped[2] = {0, 0};
    std::uint32_t x_amax = 0;
    std::int64_t ty = blockIdx.x / tiles_x, tx = blockIdx.x % tiles_x;
    // Tiles kStages - 1 ahead are in flight while one is cast: a group of loads per tile,
    // empty past the last, so that after a round's own group wait_loads<kStages - 1> always
    // means "this tile's".
    std::int64_t ly = ty, lx = tx;
#pragma unroll
    for (int s = 0; s < kStages - 1; ++s) {
        if (ly < tiles_y) load(ly, lx, ins + s * kInTile);
        commit_loads();
        advance(ly, lx);
    }
    __syncthreads();  // the scale table
    for (int stage = 0; ty < tiles_y; advance(ty, tx), stage = stage + 1 == kStages ? 0 : stage + 1) {
        // The buffer of the tile before this one: every thread has cast from it (sync below).
        if (ly < tiles_y) load(ly, lx, ins + (stage == 0 ? kStages - 1 : stage - 1) * kInTile);
        commit_loads();
        advance(ly, lx);
        wait_loads<kStages - 1>();
        __syncthreads();
        const std::uint16_t* in = ins + stage * kInTile;

        if (p.rowwise) {
#pragma unroll
            for (int h = 0; h < 32 / B; ++h) {
                const int at = rr * kInStride + (rb + h * kRowThreads) * B;
                std::uint32_t w[B / 2];
#pragma unroll
                for (int i = 0; i < B / 8; ++i) {
                    const uint4 q = *reinterpret_cast<const uint4*>(in + at + 8 * i);
                    w[4 * i] = q.x, w[4 * i + 1] = q.y, w[4 * i + 2] = q.z, w[4 * i + 3] = q.w;
                }
                std::uint32_t m = w[0] & kMagnitudes2;
#pragma unroll
                for (int i = 1; i < B / 2; ++i) m = max_u16x2(m, w[i] & kMagnitudes2);
                const std::uint32_t a = wider_half(m);
                auto get = [&](int j) { return __uint_as_float(j & 1 ? w[j / 2] & 0xFFFF0000u : w[j / 2] << 16); };
                if (p.fused_amax) x_amax = max(x_amax, finite_or_inf_amax<B>(get, a));
                clamped[0] += cast_run<B, Count>(get, a, p, row_scales, outr + at);
            }
        }
        if (p.columnwise) {
            const int r = cb * B + seg * 16;
            std::uint32_t w[16];
#pragma unroll
            for (int j = 0; j < 16; ++j) w[j] = *reinterpret_cast<const std::uint32_t*>(in + (r + j) * kInStride + 2 * cp);
            std::uint32_t m = w[0] & kMagnitudes2;
#pragma unroll
            for (int j = 1; j < 16; ++j) m = max_u16x2(m, w[j] & kMagnitudes2);
            if constexpr (kSegs == 2) m = max_u16x2(m, __shfl_xor_sync(kAllLanes, m, 1));
#pragma unroll
            for (int h = 0; h < 2; ++h) {  // column 2cp (low halves), then 2cp + 1
                auto get = [&](int j) { return __uint_as_float(h ? w[j] & 0xFFFF0000u : w[j] << 16); };
                const std::uint32_t a = h ? m & 0xFFFF0000u : m << 16;
                if (p.fused_amax && !p.rowwise) x_amax = max(x_amax, finite_or_inf_amax<16>(get, a));
                clamped[1] += cast_run<16, Count>(get, a, p, col_scales, outc + (2 * cp + h) * kColStride + r);
            }
        }
        __syncthreads();

        const std::int64_t r0 = ty * kStagedRows, c0 = tx * kStagedCols;
        if (p.rowwise) {
#pragma unroll
            for (int k = 0; k < kChunks; ++k) {
                const int i = t + k * kT;
                const std::int64_t r = r0 + i / kPerRow, c = c0 + (i % kPerRow) * 8;
                if (r < rows && c < cols)
                    *reinterpret_cast<uint4*>(row_out + r * cols + c) =
                        *reinterpret_cast<const uint4*>(outr + (i / kPerRow) * kInStride + (i % kPerRow) * 8);
            }
        }
        if (p.columnwise) {
            constexpr int kPerCol = kStagedRows / 8;  // words per row of `outc`
#pragma unroll
            for (int k = 0; k < kChunks; ++k) {
                const int i = t + k * kT;
                const std::int64_t c = c0 + i / kPerCol, r = r0 + (i % kPerCol) * 8;
                if (c < cols && r < rows)
                    *reinterpret_cast<uint4*>(col_out + c * rows + r) =
                        *reinterpret_cast<const uint4*>(outc + (i / kPerCol) * kColStride + (i % kPerCol) * 8);
            }
        }
        // The next round's loads go to the buffer read before the sync above; its stores to
        // `outr` / `outc` wait for its own first sync.
    }

    add_cta_totals(clamped, x_amax, p, counts, cta_amax);
}

// Whether the staged kernel casts x for this recipe: BF16 of whole 16-byte words in both
// copies, 1-D blocks, round to nearest, no transform.
inline bool staged_fits(const CastInput& x, const Params& p, bool two_d, bool sr, const void* row_out, const void* col_out) {
    auto aligned = [](const void* q) { return reinterpret_cast<std::uintptr_t>(q) % 16 == 0; };
    return x.dtype == DType::BF16 && !two_d && !sr && !p.rht && x.rows % 8 == 0 && x.cols % 8 == 0 && aligned(x.data) &&
           aligned(row_out) && aligned(col_out);
}

template <int B, bool Count>
void launch_staged_as(const CastInput& x, const Params& p, std::uint16_t* row_out, std::uint16_t* col_out, cudaStream_t stream) {
    auto* kernel = fp4_staged_kernel<B, Count>;
    static const int per_sm = [&] {
        FP8SCOPE_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kStagedSmem));
        int n = 0;
        FP8SCOPE_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, kStagedThreads, kStagedSmem));
        return std::max(1, n);
    }();
    const std::int64_t tiles = (x.cols + kStagedCols - 1) / kStagedCols * ((x.rows + kStagedRows - 1) / kStagedRows);
    const unsigned grid = unsigned(std::min<std::int64_t>(tiles, std::int64_t(per_sm) * qk::sm_count()));
    kernel<<<grid, kStagedThreads, kStagedSmem, stream>>>(static_cast<const std::uint16_t*>(x.data), x.rows, x.cols, p,
                                                          row_out, col_out);
}

// NVFP4 (blocks of 16) or MXFP4 (32).
inline void launch_staged(const CastInput& x, const Params& p, std::uint16_t* row_out, std::uint16_t* col_out,
                          cudaStream_t stream) {
    if (p.nvfp4) launch_staged_as<16, true>(x, p, row_out, col_out, stream);
    else if (p.rule == MXRule::RCeil) launch_staged_as<32, false>(x, p, row_out, col_out, stream);
    else launch_staged_as<32, true>(x, p, row_out, col_out, stream);
}

}  // namespace fp8scope::cuda::fp4k
