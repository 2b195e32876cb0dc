// The cast kernel for the scalings training uses: per-tensor, blockwise 1x128 and 128x128
// and MXFP8 1x32, with the block exchange fixed at compile time. Tile, micro-blocks, run casts
// and stores are the tile kernel's (tile.cuh): a CTA of 256 threads per 128x128
// tile, each thread an 8x8 micro-block, a warp 4 x 8 micro-blocks (32 rows, 64 columns).
// What differs is how the block amaxes meet. Each warp folds its lanes' run maxima with
// a transposing butterfly (7 shuffles fold 8 rows over 8 lanes, one row left per lane):
// - 1x128: a row's block spans the two warps side by side, a column's (128 rows of x) the
//   four above each other: the folded maxima meet in shared memory; after a barrier 256
//   threads turn the 256 blocks into scales, after a second every thread reads its 16.
//   (Computing them in the folding lanes instead, to save the second barrier, was slower.)
// - 128x128: one block per tile: a warp reduce, one barrier, and every thread takes the
//   max of the 8 warps' and computes the scale itself.
// - MXFP8 1x32: a row's block is 4 lanes, a column's (32 rows) the 4 lanes above each
//   other, all inside a warp: the lane left with two blocks computes their scales and the
//   lanes that cast them fetch both with one shuffle. No barrier: the grids are stored
//   transposed (quantize.h), where the two entries a lane computes sit side by side and a
//   warp's make whole 128-byte lines.
// BF16 micro-blocks stay packed, two values a register, and their run maxima are 16x2
// integer maxima of the magnitudes' bits (non-negative floats order as their bits; a NaN
// sorts above Inf). Threads whose micro-block holds NaN or Inf (rare) recompute them with
// NaN ignored, as the other kernels do, and mark the runs holding NaN or Inf.
#pragma once

#include "cuda/cast/tile.cuh"
#include "cuda/runtime/dependent_launch.cuh"

namespace fp8scope::cuda::qk {

// PerTensor: one scale for all of x (delayed: the state's; current: compute_scale of the
// amax an earlier pass left in stats), no exchange at all.
enum class BlockShape : std::uint8_t { PerTensor, Rows128, Square128, Mx32 };

// Run maxima as the cast needs them: bits of the NaN-ignoring max |x| of each row and
// column run (Inf included), and masks of the runs holding NaN or Inf. BF16 keeps two
// runs' maxima in a register (run 2i in the low half, as BF16 bits), float32 one.
template <class In>
struct RunMaxima {
    static constexpr int kPer = sizeof(In) == 2 ? 2 : 1;
    std::uint32_t rows[8 / kPer], cols[8 / kPer];
    std::uint32_t row_nf = 0, col_nf = 0;

    __device__ __forceinline__ std::uint32_t row(int j) const { return get(rows, j); }
    __device__ __forceinline__ std::uint32_t col(int k) const { return get(cols, k); }
    __device__ __forceinline__ static std::uint32_t get(const std::uint32_t (&a)[8 / kPer], int i) {
        if constexpr (kPer == 1) return a[i];
        else return (i & 1) ? a[i >> 1] & 0xFFFF0000u : a[i >> 1] << 16;
    }
};

// The micro-block x[r0 .. r0+8, c0 .. c0+8], zeros outside x: BF16 packed (w[j][k] holds
// columns 2k and 2k+1 of row j, the first in the low half), float32 as values.
template <class In>
struct Micro;

template <>
struct Micro<std::uint16_t> {
    using In = std::uint16_t;
    std::uint32_t w[8][4];

    __device__ __forceinline__ float at(int j, int k) const {
        const std::uint32_t u = w[j][k >> 1];
        return __uint_as_float((k & 1) ? (u & 0xFFFF0000u) : (u << 16));
    }

    __device__ __forceinline__ void load(const TileParams& p, std::int64_t r0, std::int64_t c0) {
        const auto* x = static_cast<const std::uint16_t*>(p.x);
        if (p.vec_load && r0 + 8 <= p.rows && c0 + 8 <= p.cols) {
#pragma unroll
            for (int j = 0; j < 8; ++j) {
                const uint4 q = *reinterpret_cast<const uint4*>(x + (r0 + j) * p.cols + c0);
                w[j][0] = q.x, w[j][1] = q.y, w[j][2] = q.z, w[j][3] = q.w;
            }
            return;
        }
#pragma unroll
        for (int j = 0; j < 8; ++j) {
#pragma unroll
            for (int k = 0; k < 4; ++k) {
                const std::int64_t r = r0 + j, c = c0 + 2 * k;
                const std::uint32_t lo = (r < p.rows && c < p.cols) ? x[r * p.cols + c] : 0u;
                const std::uint32_t hi = (r < p.rows && c + 1 < p.cols) ? x[r * p.cols + c + 1] : 0u;
                w[j][k] = lo | (hi << 16);
            }
        }
    }

    // Run maxima as 16x2 integer maxima of the magnitudes' bits; when one of them is NaN
    // or Inf (it sorts at or above 0x7F80), again with NaN halves zeroed, and the masks.
    __device__ __forceinline__ void maxima(RunMaxima<In>& r) const {
        std::uint32_t c[4] = {0, 0, 0, 0}, top = 0;
#pragma unroll
        for (int j = 0; j < 8; ++j) {
            std::uint32_t a[4];
#pragma unroll
            for (int k = 0; k < 4; ++k) {
                a[k] = w[j][k] & 0x7FFF7FFFu;
                c[k] = __vmaxu2(c[k], a[k]);
            }
            const std::uint32_t m = __vmaxu2(__vmaxu2(a[0], a[1]), __vmaxu2(a[2], a[3]));
            top = __vmaxu2(top, m);
            put_row(r, j, m);
        }
        if (__vcmpgeu2(top, 0x7F807F80u)) {
            std::uint32_t cnf[4] = {0, 0, 0, 0};
#pragma unroll
            for (int k = 0; k < 4; ++k) c[k] = 0;
#pragma unroll
            for (int j = 0; j < 8; ++j) {
                std::uint32_t m = 0, nf = 0;
#pragma unroll
                for (int k = 0; k < 4; ++k) {
                    std::uint32_t a = w[j][k] & 0x7FFF7FFFu;
                    const std::uint32_t f = __vcmpgeu2(a, 0x7F807F80u);  // 0xFFFF per NaN or Inf half
                    a &= ~__vcmpgtu2(a, 0x7F807F80u);                    // NaN halves ignored
                    cnf[k] |= f, nf |= f;
                    c[k] = __vmaxu2(c[k], a);
                    m = __vmaxu2(m, a);
                }
                put_row(r, j, m);
                r.row_nf |= (nf != 0u) << j;
            }
#pragma unroll
            for (int k = 0; k < 4; ++k)
                r.col_nf |= ((cnf[k] & 0xFFFFu) != 0u) << (2 * k) | (cnf[k] > 0xFFFFu) << (2 * k + 1);
        }
#pragma unroll
        for (int k = 0; k < 4; ++k) r.cols[k] = c[k];
    }

    // Row j's max from the 16x2 maxima m of its words, into its half of rows[j / 2].
    __device__ __forceinline__ static void put_row(RunMaxima<In>& r, int j, std::uint32_t m) {
        const std::uint32_t h = __vmaxu2(m, __funnelshift_l(m, m, 16));  // the max in both halves
        r.rows[j >> 1] = (j & 1) ? __byte_perm(r.rows[j >> 1], h, 0x7610) : h;
    }
};

template <>
struct Micro<float> {
    using In = float;
    float v[8][8];

    __device__ __forceinline__ float at(int j, int k) const { return v[j][k]; }

    __device__ __forceinline__ void load(const TileParams& p, std::int64_t r0, std::int64_t c0) {
        load_micro<float>(p, r0, c0, v);
    }

    // The tile kernel's float run amaxes, as bits.
    __device__ __forceinline__ void maxima(RunMaxima<In>& r) const {
        float rm[8], cm[8];
        run_amaxes(v, rm, cm, r.row_nf, r.col_nf);
#pragma unroll
        for (int i = 0; i < 8; ++i) r.rows[i] = __float_as_uint(rm[i]), r.cols[i] = __float_as_uint(cm[i]);
    }
};

// One step of a transposing max-reduction over the lanes differing in bit `o`: of the 2N
// values v[0..2N) the lane with bit o clear keeps the first N, the other the last N, each
// the max of its own and its partner's. After steps of N = 4, 2, 1 over bits o1, o2, o3 a
// lane holds in v[0] the max over those 8 lanes of value (o1 set ? 4 : 0) + (o2 ? 2 : 0) +
// (o3 ? 1 : 0); after N = 4, 2 it holds values (o1 ? 4 : 0) + (o2 ? 2 : 0) + i in v[i].
template <int N>
__device__ __forceinline__ void fold(std::uint32_t (&v)[8], int o, int lane) {
    const bool upper = (lane & o) != 0;
#pragma unroll
    for (int i = 0; i < N; ++i) {
        const std::uint32_t send = upper ? v[i] : v[i + N];
        const std::uint32_t keep = upper ? v[i + N] : v[i];
        v[i] = max(keep, __shfl_xor_sync(0xFFFFFFFFu, send, o));
    }
}

// What a block's cell holds for each row (or column) run: its amax bits, all ones for an
// MX block with NaN or Inf.
template <class In>
__device__ __forceinline__ void mark_cells(std::uint32_t (&m)[8], const RunMaxima<In>& r, bool rows, bool mx) {
    const std::uint32_t nf = rows ? r.row_nf : r.col_nf;
#pragma unroll
    for (int i = 0; i < 8; ++i) m[i] = (mx && (nf >> i & 1u)) ? 0xFFFFFFFFu : (rows ? r.row(i) : r.col(i));
}

// A row-major grid's entries stay in L2 (evict_last) while the codes stream past: a tile
// writes only 4 bytes of a grid row, the tiles beside it the rest, and a line that leaves
// L2 half written costs DRAM a read-modify-write (1x128 over 8192^2 BF16 with a row-major
// grid: 74 -> 78% of the copy bandwidth). A transposed grid holds a tile's entries in one
// run.
__device__ __forceinline__ void store_scale(float* sinv, const ScaleGrid& g, std::int64_t gr, std::int64_t gc,
                                            float scale_inv) {
    if (!g.contains(gr, gc)) return;
    float* at = sinv + g.index(gr, gc);
    std::uint64_t keep;
    asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(keep));
    asm volatile("st.global.L2::cache_hint.f32 [%0], %1, %2;" ::"l"(at), "f"(scale_inv), "l"(keep) : "memory");
}

// Shared memory. 1x128 has two barriers per tile; 128x128's buffers alternate by tile, so
// its one barrier per tile is enough when a CTA loops over tiles.
union BlockShared {
    struct {
        std::uint32_t row[2][kTile];  // 1x128: per row, the two warps' maxima
        std::uint32_t col[4][kTile];  // 1x128: per column, the four warps'
        float s[2 * kTile];           // 1x128: the blocks' scales, rows then columns
    } part;
    std::uint32_t tile[2][8];  // 128x128: per warp
};

// MX 1x32: the amax bits of the lane's two blocks of one direction (rows or columns
// (o1 ? 4 : 0) + (o2 ? 2 : 0) + i of its micro-block, i = 0, 1), its 8 runs' cells folded
// over the lanes that differ in bits o1 and o2.
__device__ __forceinline__ void mx_block_amax(const RunMaxima<float>& rm, bool rows, int o1, int o2, int lane,
                                              std::uint32_t (&a)[2]) {
    std::uint32_t m[8];
    mark_cells(m, rm, rows, true);
    fold<4>(m, o1, lane), fold<2>(m, o2, lane);
    a[0] = m[0], a[1] = m[1];
}

// BF16: the cells stay packed two a register (16-bit magnitude bits, 0xFFFF for a run with
// NaN or Inf, which still sorts above every finite one), so the folds move half the words.
__device__ __forceinline__ void mx_block_amax(const RunMaxima<std::uint16_t>& rm, bool rows, int o1, int o2, int lane,
                                              std::uint32_t (&a)[2]) {
    std::uint32_t m[4];
    const std::uint32_t nf = rows ? rm.row_nf : rm.col_nf;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        m[i] = rows ? rm.rows[i] : rm.cols[i];
        if (nf) m[i] |= ((nf >> (2 * i) & 1u) ? 0x0000FFFFu : 0u) | ((nf >> (2 * i + 1) & 1u) ? 0xFFFF0000u : 0u);
    }
    const bool up1 = (lane & o1) != 0, up2 = (lane & o2) != 0;
#pragma unroll
    for (int i = 0; i < 2; ++i)  // fold<4> of the 8 cells: pairs 0, 1 against 2, 3
        m[i] = __vmaxu2(up1 ? m[i + 2] : m[i], __shfl_xor_sync(0xFFFFFFFFu, up1 ? m[i] : m[i + 2], o1));
    m[0] = __vmaxu2(up2 ? m[1] : m[0], __shfl_xor_sync(0xFFFFFFFFu, up2 ? m[0] : m[1], o2));  // fold<2>
    a[0] = m[0] << 16, a[1] = m[0] & 0xFFFF0000u;
}

// An MX scale 2^-e (|e| <= 127, or NaN) has no bits in the low half of its float32, so a
// lane's two fit one register as their high halves and one shuffle hands both over.
__device__ __forceinline__ std::uint32_t mx_pair(const float (&s)[2]) {
    return (__float_as_uint(s[0]) >> 16) | (__float_as_uint(s[1]) & 0xFFFF0000u);
}
__device__ __forceinline__ float mx_unpair(std::uint32_t pair, int i) {
    return __uint_as_float(i ? pair & 0xFFFF0000u : pair << 16);
}

// MX 1x32: the lane's two scales of one direction computed (kept in `held` for the cast)
// and stored at entries (gr, gc) and (gr + 1, gc) of the grid, side by side (MX 1x32 grids
// are always transposed: scale_grid).
template <Format F, class In>
__device__ __forceinline__ void mx_scales(const RunMaxima<In>& rm, bool rows, int o1, int o2, int lane, MXRule rule,
                                          float (&held)[2], float* sinv, std::uint8_t* e8m0, const ScaleGrid& g,
                                          std::int64_t gr, std::int64_t gc) {
    std::uint32_t a[2];
    mx_block_amax(rm, rows, o1, o2, lane, a);
    BlockScale b[2];
#pragma unroll
    for (int i = 0; i < 2; ++i) {
        b[i] = block_scale(a[i], F, true, rule, false);
        held[i] = b[i].s;
    }
    if (!g.contains(gr, gc)) return;
    const std::int64_t at = g.index(gr, gc);
    if (gr + 1 < g.rows && (at & 1) == 0 && (reinterpret_cast<std::uintptr_t>(sinv) & 7) == 0 &&
        (reinterpret_cast<std::uintptr_t>(e8m0) & 1) == 0) {
        *reinterpret_cast<float2*>(sinv + at) = make_float2(b[0].scale_inv, b[1].scale_inv);
        if (e8m0) *reinterpret_cast<std::uint16_t*>(e8m0 + at) = std::uint16_t(b[0].e8m0 | (b[1].e8m0 << 8));
        return;
    }
    for (int i = 0; i < 2 && gr + i < g.rows; ++i) {
        sinv[at + i] = b[i].scale_inv;
        if (e8m0) e8m0[at + i] = b[i].e8m0;
    }
}

template <class In, Format F, BlockShape B>
__global__ void __launch_bounds__(kTileThreads, sizeof(In) == 2 ? 3 : 2) cast_block_kernel(const TileParams p) {
    __shared__ __align__(16) BlockShared sh;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int lr0 = (warp >> 1) * 32 + (lane >> 3) * 8;  // micro-block origin in the tile
    const int lc0 = (warp & 1) * 64 + (lane & 7) * 8;
    const bool want_row = p.row_codes != nullptr, want_col = p.col_codes != nullptr;
    constexpr bool kMx = B == BlockShape::Mx32;
    const std::int64_t tiles_r = (p.rows + kTile - 1) / kTile;
    const std::int64_t tc = blockIdx.x, tiles_c = (p.cols + kTile - 1) / kTile;
    // A dependent launch after the zeroing of the stats (current: after the amax pass): it
    // waits for them only where it reads or writes them. The push after it may start.
    allow_dependents();
    float s_tensor = 1.0f;
    if constexpr (B == BlockShape::PerTensor) {
        if (p.current) wait_prior_grid();
        s_tensor = p.current ? qk::compute_scale(p.stats->amax, F, p.eps, p.pow2) : (p.scale_in ? *p.scale_in : 1.0f);
        if (blockIdx.x == 0 && blockIdx.y == 0 && tid == 0) {
            wait_prior_grid();
            p.stats->scale = s_tensor;
            const float si = div_rn(1.0f, s_tensor);
            if (want_row) p.row_sinv[0] = si;
            if (want_col) p.col_sinv[0] = si;
        }
    } else if (blockIdx.x == 0 && blockIdx.y == 0 && tid == 0) {
        wait_prior_grid();
        p.stats->scale = float_of(kQuietNaNBits);
    }

    std::uint32_t amax_bits = 0, ov_row = 0, ov_col = 0;
    int parity = 0;
    for (std::int64_t tr = blockIdx.y; tr < tiles_r; tr += gridDim.y, parity ^= 1) {
        const std::int64_t r0 = tr * kTile + lr0, c0 = tc * kTile + lc0;
        Micro<In> x;
        x.load(p, r0, c0);
        // Never taken (a CTA per tile column), but an exit between the load and the casts
        // changes nvcc's register allocation: the BF16 kernels spill 0-8 bytes instead of
        // 28-56, and cast 2-4% faster (MXFP8 on an H200: 79.5 -> 83.2% of the copy bandwidth).
        if (tc >= tiles_c) break;
        RunMaxima<In> rm;
        x.maxima(rm);
        std::uint32_t top = 0;
#pragma unroll
        for (int j = 0; j < 8; ++j) top = max(top, rm.row(j));
        amax_bits = max(amax_bits, top);

        // The scales: 128x128 one for the tile, 1x128 in shared memory, MX 1x32 in the lanes
        // that folded them (two rows and two columns each), fetched per run.
        float s_tile = s_tensor, s_row_held[2] = {1.0f, 1.0f}, s_col_held[2] = {1.0f, 1.0f};
        if constexpr (B == BlockShape::Square128) {
            top = __reduce_max_sync(0xFFFFFFFFu, top);
            if (lane == 0) sh.tile[parity][warp] = top;
            __syncthreads();
#pragma unroll
            for (int w = 0; w < 8; ++w) top = max(top, sh.tile[parity][w]);
            const BlockScale b = block_scale(top, F, false, p.rule, p.pow2);
            if (tid == 0) {
                if (want_row) store_scale(p.row_sinv, p.row_grid, tr, tc, b.scale_inv);
                if (want_col) store_scale(p.col_sinv, p.col_grid, tc, tr, b.scale_inv);
            }
            s_tile = b.s;
        } else if constexpr (B == BlockShape::Rows128) {
            std::uint32_t m[8];
            if (want_row) {  // a row over the 8 lanes of a micro-block row: lane & 7 holds row lane & 7
                mark_cells(m, rm, true, false);
                fold<4>(m, 4, lane), fold<2>(m, 2, lane), fold<1>(m, 1, lane);
                sh.part.row[warp & 1][lr0 + (lane & 7)] = m[0];
            }
            if (want_col) {  // columns over the 4 lanes above each other: two per lane
                mark_cells(m, rm, false, false);
                fold<4>(m, 16, lane), fold<2>(m, 8, lane);
                const int k = lc0 + 2 * ((lane >> 3) & 3);
                sh.part.col[warp >> 1][k] = m[0];
                sh.part.col[warp >> 1][k + 1] = m[1];
            }
            __syncthreads();
            // 256 threads, 256 blocks: rows, then columns.
            if (tid < kTile ? want_row : want_col) {
                const int i = tid & (kTile - 1);
                const std::uint32_t a = tid < kTile ? max(sh.part.row[0][i], sh.part.row[1][i])
                                                    : max(max(sh.part.col[0][i], sh.part.col[1][i]),
                                                          max(sh.part.col[2][i], sh.part.col[3][i]));
                const BlockScale b = block_scale(a, F, false, p.rule, p.pow2);
                sh.part.s[tid] = b.s;
                if (tid < kTile) store_scale(p.row_sinv, p.row_grid, tr * kTile + i, tc, b.scale_inv);
                else store_scale(p.col_sinv, p.col_grid, tc * kTile + i, tr, b.scale_inv);
            }
            __syncthreads();
        } else if constexpr (B == BlockShape::Mx32) {
            // A row's block: the 4 lanes of lane & 4, folded, lane holds rows 2 (lane & 3) + i.
            // A column's (32 rows): the 4 lanes above each other, lane holds columns
            // 2 ((lane >> 3) & 3) + i.
            if (want_row)
                mx_scales<F>(rm, true, 2, 1, lane, p.rule, s_row_held, p.row_sinv, p.row_e8m0, p.row_grid,
                             tr * kTile + lr0 + 2 * (lane & 3), (tc * kTile + lc0) >> 5);
            if (want_col)
                mx_scales<F>(rm, false, 16, 8, lane, p.rule, s_col_held, p.col_sinv, p.col_e8m0, p.col_grid,
                             tc * kTile + lc0 + 2 * ((lane >> 3) & 3), (tr * kTile + lr0) >> 5);
        }

        if (want_row) {
            std::uint32_t pair = 0;
#pragma unroll
            for (int j = 0; j < 8; ++j) {
                float s = s_tile;
                if constexpr (B == BlockShape::Rows128) s = sh.part.s[lr0 + j];
                if constexpr (B == BlockShape::Mx32) {
                    if ((j & 1) == 0) pair = __shfl_sync(0xFFFFFFFFu, mx_pair(s_row_held), (lane & ~3) | (j >> 1));
                    s = mx_unpair(pair, j & 1);
                }
                const std::int64_t r = r0 + j;
                if (r >= p.rows) continue;
                float v[8];
#pragma unroll
                for (int k = 0; k < 8; ++k) v[k] = x.at(j, k);
                const uint2 w = cast_run<F>(v, s, __uint_as_float(rm.row(j)), rm.row_nf >> j & 1u, kMx, ov_row);
                store_run(p.row_codes + r * p.cols + c0, w, run_length(p.cols - c0), p.row_vec_store);
            }
        }
        if (want_col) {
            std::uint32_t pair = 0;
#pragma unroll
            for (int k = 0; k < 8; ++k) {
                float s = s_tile;
                if constexpr (B == BlockShape::Rows128) s = sh.part.s[kTile + lc0 + k];
                if constexpr (B == BlockShape::Mx32) {
                    if ((k & 1) == 0) pair = __shfl_sync(0xFFFFFFFFu, mx_pair(s_col_held), (lane & 7) | ((k >> 1) << 3));
                    s = mx_unpair(pair, k & 1);
                }
                const std::int64_t c = c0 + k;
                if (c >= p.cols) continue;
                float v[8];
#pragma unroll
                for (int j = 0; j < 8; ++j) v[j] = x.at(j, k);
                const uint2 w = cast_run<F>(v, s, __uint_as_float(rm.col(k)), rm.col_nf >> k & 1u, kMx, ov_col);
                store_run(p.col_codes + c * p.rows + r0, w, run_length(p.rows - r0), p.col_vec_store);
            }
        }
    }

    cast_epilogue(p, lane, ov_row, ov_col, B != BlockShape::PerTensor || p.fuse_amax, amax_bits);
}

// The launch over all of x (tile_grid).
template <class In, Format F>
void launch_block(const TileParams& p, BlockShape b, cudaStream_t stream) {
    auto launch = [&](auto kernel) { launch_dependent(kernel, tile_grid(p), kTileThreads, 0, stream, p); };
    switch (b) {
    case BlockShape::PerTensor: launch(cast_block_kernel<In, F, BlockShape::PerTensor>); break;
    case BlockShape::Rows128: launch(cast_block_kernel<In, F, BlockShape::Rows128>); break;
    case BlockShape::Square128: launch(cast_block_kernel<In, F, BlockShape::Square128>); break;
    case BlockShape::Mx32: launch(cast_block_kernel<In, F, BlockShape::Mx32>); break;
    }
}

}  // namespace fp8scope::cuda::qk
