// The one-pass cast kernel: a CTA of 256 threads takes a 128x128 tile of x; each thread
// holds an 8x8 micro-block (8 rows of 8 contiguous elements: 16-byte loads), so it owns
// 8 rowwise runs (a row, 8 columns: one 8-byte store into the rowwise copy) and 8
// columnwise runs (a column, 8 rows: one 8-byte store into row c of x^T). The transpose
// happens in registers, no shared-memory staging: a warp is 4 x 8 micro-blocks, so every
// store instruction writes whole 32-byte sectors of both copies.
//
// Per-tensor scaling and the block shapes training uses have a kernel of their own
// (block.cuh) built from this one's parts. Here scales come from one of two
// sources:
// - Cells: block shapes that tile 128 (bc in {8..128}, br a power of two up to 128).
//   Block amaxes reduce in the thread, over lanes with shuffles, then across warps with
//   shared-memory atomicMax into one cell per block (non-negative floats order as their
//   bits); the cells then turn into scales in place and the tile writes its grid entries.
// - Grid: any other shape. An earlier kernel left each block's amax bits in the scale_inv
//   grids; every element looks its block up (slow, exact; shapes nobody trains with).
//
// A run casts through the hardware's cvt.rn.satfinite when it cannot overflow and holds
// no NaN (|run amax * s| <= Fp8::kFastMax), else through the exact integer rounding that
// also counts overflow. MX blocks that hold NaN or Inf write the canonical NaN code.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/cast/quantize.h"
#include "cuda/cast/rules.cuh"
#include "cuda/runtime/dependent_launch.cuh"

namespace fp8scope::cuda::qk {

constexpr int kTile = 128;
constexpr int kTileThreads = 256;

enum class ScaleSource : std::uint8_t { Cells, Grid };

struct TileParams {
    const void* x;
    std::int64_t rows, cols;
    bool vec_load;  // 16-byte loads along a row are aligned (cols and pointer)
    std::uint8_t* row_codes;  // (R, C); null: no rowwise copy
    float* row_sinv;          // rowwise grid (Grid: holds the block amax bits on entry)
    std::uint8_t* row_e8m0;
    std::uint8_t* col_codes;  // (C, R)
    float* col_sinv;
    std::uint8_t* col_e8m0;
    bool row_vec_store, col_vec_store;  // 8-byte code stores are aligned
    CastStats* stats;
    bool fuse_amax;  // this pass computes the tensor amax
    // Per-tensor scaling (block.cuh)
    bool current;           // scale = compute_scale(stats->amax) (current scaling) ...
    const float* scale_in;  // ... else *scale_in, 1 when null (delayed scaling)
    float eps;
    bool pow2;
    // Cells and Grid: the rowwise block br x bc; the columnwise copy's blocks cover bc
    // rows x br columns of x. Cells also gets their log2.
    int br, bc, br_log2, bc_log2;
    bool mx;
    MXRule rule;
    ScaleGrid row_grid, col_grid;
};

// Shared-memory cells a Cells launch needs (rowwise cells, then columnwise cells).
inline int tile_cells(int br, int bc) { return 2 * (kTile / br) * (kTile / bc); }

template <class In>
__device__ __forceinline__ float load_one(const In* x, std::int64_t i) {
    if constexpr (sizeof(In) == 2) return __uint_as_float(static_cast<std::uint32_t>(x[i]) << 16);
    else return x[i];
}

// v = x[r0 .. r0+8, c0 .. c0+8], zeros outside x.
template <class In>
__device__ __forceinline__ void load_micro(const TileParams& p, std::int64_t r0, std::int64_t c0, float (&v)[8][8]) {
    const In* x = static_cast<const In*>(p.x);
    if (p.vec_load && r0 + 8 <= p.rows && c0 + 8 <= p.cols) {
#pragma unroll
        for (int j = 0; j < 8; ++j) {
            const In* src = x + (r0 + j) * p.cols + c0;
            if constexpr (sizeof(In) == 2) {
                const uint4 q = *reinterpret_cast<const uint4*>(src);
                const std::uint32_t w[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
                for (int k = 0; k < 4; ++k) {
                    v[j][2 * k] = __uint_as_float(w[k] << 16);
                    v[j][2 * k + 1] = __uint_as_float(w[k] & 0xFFFF0000u);
                }
            } else {
                const float4 a = reinterpret_cast<const float4*>(src)[0];
                const float4 b = reinterpret_cast<const float4*>(src)[1];
                v[j][0] = a.x, v[j][1] = a.y, v[j][2] = a.z, v[j][3] = a.w;
                v[j][4] = b.x, v[j][5] = b.y, v[j][6] = b.z, v[j][7] = b.w;
            }
        }
    } else {
#pragma unroll
        for (int j = 0; j < 8; ++j) {
#pragma unroll
            for (int k = 0; k < 8; ++k) {
                const std::int64_t r = r0 + j, c = c0 + k;
                v[j][k] = (r < p.rows && c < p.cols) ? load_one(x, r * p.cols + c) : 0.0f;
            }
        }
    }
}

// Per-run amaxes of a micro-block (NaN ignored, Inf included) and, where the sum says
// NaN or Inf may be there, the exact masks of the runs holding them (bit j: row j, bit
// k: column k). Returns the micro-block's amax.
__device__ __forceinline__ float run_amaxes(const float (&v)[8][8], float (&rmax)[8], float (&cmax)[8],
                                            std::uint32_t& rnf, std::uint32_t& cnf) {
    float sum = 0.0f, top = 0.0f;
#pragma unroll
    for (int k = 0; k < 8; ++k) cmax[k] = 0.0f;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
        rmax[j] = 0.0f;
#pragma unroll
        for (int k = 0; k < 8; ++k) {
            rmax[j] = fmaxf(rmax[j], fabsf(v[j][k]));
            cmax[k] = fmaxf(cmax[k], fabsf(v[j][k]));
            sum += v[j][k];
        }
        top = fmaxf(top, rmax[j]);
    }
    rnf = cnf = 0;
    if (is_nan(sum) || is_inf(top)) {
#pragma unroll
        for (int j = 0; j < 8; ++j)
#pragma unroll
            for (int k = 0; k < 8; ++k)
                if (!(fabsf(v[j][k]) < __uint_as_float(kInfBits))) rnf |= 1u << j, cnf |= 1u << k;
    }
    return top;
}

// 8 codes of one run packed little-endian (code i in byte i).
template <Format F>
__device__ __forceinline__ uint2 cast_run_fast(const float (&y)[8]) {
    std::uint32_t h[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) h[i] = cast2_fast<F>(y[2 * i], y[2 * i + 1]);
    return make_uint2(h[0] | (h[1] << 16), h[2] | (h[3] << 16));
}

// The exact path: rare (runs with NaN, Inf or a possible overflow), so kept out of line
// to leave the hot loop small. Returns the codes in x, y and the overflow count in z.
template <Format F>
__device__ __noinline__ uint3 cast_run_exact(float x0, float x1, float x2, float x3, float x4, float x5, float x6,
                                             float x7, float s) {
    const float x[8] = {x0, x1, x2, x3, x4, x5, x6, x7};
    std::uint32_t w[2] = {0, 0}, overflow = 0;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
        std::uint32_t o;
        w[i / 4] |= static_cast<std::uint32_t>(cast_scaled_exact<F>(x[i], s, o)) << (8 * (i % 4));
        overflow += o;
    }
    return make_uint3(w[0], w[1], overflow);
}

// The codes of one run of 8 values x sharing the scale s; `run_amax` is their NaN-ignoring
// max |x| and `special` says a value is NaN or Inf.
template <Format F>
__device__ __forceinline__ uint2 cast_run(const float (&x)[8], float s, float run_amax, bool special, bool mx,
                                          std::uint32_t& overflow) {
    // An MX block with NaN or Inf has a NaN scale, which fails the bound too: one test on
    // the common path for both.
    if (special || !(fabsf(mul_rn(run_amax, s)) <= Fp8<F>::kFastMax)) {
        if (mx && is_nan(s)) return make_uint2(0x01010101u * Fp8<F>::kNaNCode, 0x01010101u * Fp8<F>::kNaNCode);
        const uint3 r = cast_run_exact<F>(x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7], s);
        overflow += r.z;
        return make_uint2(r.x, r.y);
    }
    float y[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) y[i] = mul_rn(x[i], s);
    return cast_run_fast<F>(y);
}

// Elements of a run inside x, from those left in its row or column.
__device__ __forceinline__ int run_length(std::int64_t left) { return left >= 8 ? 8 : (left > 0 ? int(left) : 0); }

// Stores a run's 8 codes at dst[0..n) (n <= 8), as one 8-byte store when whole and aligned.
__device__ __forceinline__ void store_run(std::uint8_t* dst, uint2 w, int n, bool vec) {
    if (vec && n == 8) {
        *reinterpret_cast<uint2*>(dst) = w;
        return;
    }
    for (int i = 0; i < n; ++i) dst[i] = static_cast<std::uint8_t>((i < 4 ? w.x : w.y) >> (8 * (i % 4)));
}

// Grid source: the scale of the block holding (r, c) of x^T or x, from the amax bits the
// amax kernel left in the grid. One lookup per block change along a run.
struct GridScale {
    std::int64_t last = -1;
    float s = 1.0f;
    __device__ __forceinline__ float at(const float* grid, std::int64_t i, Format f, const TileParams& p) {
        if (i != last) {
            last = i;
            s = block_scale(__float_as_uint(grid[i]), f, p.mx, p.rule, p.pow2).s;
        }
        return s;
    }
};

// A cast kernel's last words: overflow counts, one atomic per warp that has some; the
// tensor amax (when fused), one per warp and only when it raises what is there (a read
// is cheaper than a contended atomic, and no barrier holds the CTA).
__device__ __forceinline__ void cast_epilogue(const TileParams& p, int lane, std::uint32_t ov_row, std::uint32_t ov_col,
                                              bool amax, std::uint32_t amax_bits) {
    wait_prior_grid();  // the zeroed stats, when launched as a dependent
    ov_row = __reduce_add_sync(0xFFFFFFFFu, ov_row);
    ov_col = __reduce_add_sync(0xFFFFFFFFu, ov_col);
    if (lane == 0 && ov_row) atomicAdd(&p.stats->overflow_rowwise, static_cast<unsigned long long>(ov_row));
    if (lane == 0 && ov_col) atomicAdd(&p.stats->overflow_columnwise, static_cast<unsigned long long>(ov_col));
    if (!amax) return;
    amax_bits = __reduce_max_sync(0xFFFFFFFFu, amax_bits);
    auto* to = reinterpret_cast<unsigned int*>(&p.stats->amax);
    if (lane == 0 && amax_bits > *reinterpret_cast<volatile unsigned int*>(to)) atomicMax(to, amax_bits);
}

template <class In, Format F, ScaleSource S>
__global__ void __launch_bounds__(kTileThreads, 2) cast_tile_kernel(const TileParams p) {
    extern __shared__ std::uint32_t cells[];  // Cells: rowwise cells, then columnwise cells
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int lr0 = (warp >> 1) * 32 + (lane >> 3) * 8;  // micro-block origin in the tile
    const int lc0 = (warp & 1) * 64 + (lane & 7) * 8;
    const bool want_row = p.row_codes != nullptr, want_col = p.col_codes != nullptr;
    const std::int64_t tiles_r = (p.rows + kTile - 1) / kTile;
    const std::int64_t tc = blockIdx.x;

    // Cells geometry (powers of two): rowwise cells (128/br) x (128/bc), columnwise cells
    // (128/bc) x (128/br), both row-major over the tile.
    const int row_cc = kTile >> p.bc_log2, col_cc = kTile >> p.br_log2;
    const int n_row_cells = (kTile >> p.br_log2) * row_cc;
    const int n_cells = 2 * n_row_cells;

    if (blockIdx.x == 0 && blockIdx.y == 0 && tid == 0) p.stats->scale = float_of(kQuietNaNBits);

    std::uint32_t amax_bits = 0, ov_row = 0, ov_col = 0;
    for (std::int64_t tr = blockIdx.y; tr < tiles_r; tr += gridDim.y) {
        const std::int64_t r0 = tr * kTile + lr0, c0 = tc * kTile + lc0;
        float v[8][8];
        load_micro<In>(p, r0, c0, v);
        if constexpr (S == ScaleSource::Cells) {
            __syncthreads();  // the previous tile is done with the cells
            for (int i = tid; i < n_cells; i += kTileThreads) cells[i] = 0;
        }

        float rmax[8], cmax[8];
        std::uint32_t rnf, cnf;  // bit j / k: that run holds NaN or Inf
        amax_bits = max(amax_bits, __float_as_uint(run_amaxes(v, rmax, cmax, rnf, cnf)));

        if constexpr (S == ScaleSource::Cells) {
            __syncthreads();  // cells zeroed
            const int br = p.br, bc = p.bc;
            // A cell's value: the block amax bits, or all ones for an MX block with NaN/Inf.
            if (want_row) {
                std::uint32_t m[8];
#pragma unroll
                for (int j = 0; j < 8; ++j) m[j] = (p.mx && (rnf >> j & 1u)) ? 0xFFFFFFFFu : __float_as_uint(rmax[j]);
                // rows of one block inside the thread (br = 2, 4, 8+)
#pragma unroll
                for (int j = 0; j < 8; ++j) if (br >= 2) m[j] = max(m[j], m[j ^ 1]);
#pragma unroll
                for (int j = 0; j < 8; ++j) if (br >= 4) m[j] = max(m[j], m[j ^ 2]);
#pragma unroll
                for (int j = 0; j < 8; ++j) if (br >= 8) m[j] = max(m[j], m[j ^ 4]);
                const int rows_in = min(br, 8), lanes_c = min(bc >> 3, 8), lanes_r = max(1, min(br >> 3, 4));
                const bool leader = ((lane & 7) & (lanes_c - 1)) == 0 && ((lane >> 3) & (lanes_r - 1)) == 0;
#pragma unroll
                for (int j = 0; j < 8; ++j) {
                    if (j & (rows_in - 1)) continue;  // uniform: br is the same for all
                    std::uint32_t x = m[j];
                    for (int o = 1; o < lanes_c; o <<= 1) x = max(x, __shfl_xor_sync(0xFFFFFFFFu, x, o));
                    for (int o = 8; o < 8 * lanes_r; o <<= 1) x = max(x, __shfl_xor_sync(0xFFFFFFFFu, x, o));
                    if (leader && x) atomicMax(&cells[((lr0 + j) >> p.br_log2) * row_cc + (lc0 >> p.bc_log2)], x);
                }
            }
            if (want_col) {
                std::uint32_t m[8];
#pragma unroll
                for (int k = 0; k < 8; ++k) m[k] = (p.mx && (cnf >> k & 1u)) ? 0xFFFFFFFFu : __float_as_uint(cmax[k]);
                // columns of one block inside the thread (br = 2, 4, 8+ columns of x)
#pragma unroll
                for (int k = 0; k < 8; ++k) if (br >= 2) m[k] = max(m[k], m[k ^ 1]);
#pragma unroll
                for (int k = 0; k < 8; ++k) if (br >= 4) m[k] = max(m[k], m[k ^ 2]);
#pragma unroll
                for (int k = 0; k < 8; ++k) if (br >= 8) m[k] = max(m[k], m[k ^ 4]);
                const int cols_in = min(br, 8), lanes_c = max(1, min(br >> 3, 8)), lanes_r = min(bc >> 3, 4);
                const bool leader = ((lane & 7) & (lanes_c - 1)) == 0 && ((lane >> 3) & (lanes_r - 1)) == 0;
#pragma unroll
                for (int k = 0; k < 8; ++k) {
                    if (k & (cols_in - 1)) continue;
                    std::uint32_t x = m[k];
                    for (int o = 1; o < lanes_c; o <<= 1) x = max(x, __shfl_xor_sync(0xFFFFFFFFu, x, o));
                    for (int o = 8; o < 8 * lanes_r; o <<= 1) x = max(x, __shfl_xor_sync(0xFFFFFFFFu, x, o));
                    if (leader && x)
                        atomicMax(&cells[n_row_cells + (lr0 >> p.bc_log2) * col_cc + ((lc0 + k) >> p.br_log2)], x);
                }
            }
            __syncthreads();
            // Cells -> scales; each block's grid entries belong to this tile alone.
            for (int i = tid; i < n_cells; i += kTileThreads) {
                const BlockScale b = block_scale(cells[i], F, p.mx, p.rule, p.pow2);
                std::int64_t gr, gc;
                if (i < n_row_cells) {
                    gr = tr * (kTile >> p.br_log2) + i / row_cc;
                    gc = tc * row_cc + i % row_cc;
                    if (want_row && p.row_grid.contains(gr, gc)) {
                        const std::int64_t at = p.row_grid.index(gr, gc);
                        p.row_sinv[at] = b.scale_inv;
                        if (p.row_e8m0) p.row_e8m0[at] = b.e8m0;
                    }
                } else {
                    const int ci = i - n_row_cells;  // (x rows / bc, x cols / br) in the tile
                    gr = tc * col_cc + ci % col_cc;
                    gc = tr * (kTile >> p.bc_log2) + ci / col_cc;
                    if (want_col && p.col_grid.contains(gr, gc)) {
                        const std::int64_t at = p.col_grid.index(gr, gc);
                        p.col_sinv[at] = b.scale_inv;
                        if (p.col_e8m0) p.col_e8m0[at] = b.e8m0;
                    }
                }
                cells[i] = __float_as_uint(b.s);
            }
            __syncthreads();
        }

        if (want_row) {
            GridScale gs;
#pragma unroll
            for (int j = 0; j < 8; ++j) {
                const std::int64_t r = r0 + j;
                if (r >= p.rows) continue;
                float x[8];
#pragma unroll
                for (int k = 0; k < 8; ++k) x[k] = v[j][k];
                uint2 w;
                if constexpr (S == ScaleSource::Grid) {
                    std::uint32_t wb[2] = {0, 0};
#pragma unroll
                    for (int k = 0; k < 8; ++k) {
                        const std::int64_t c = c0 + k;
                        if (c >= p.cols) continue;
                        const std::int64_t g = p.row_grid.index(r / p.br, c / p.bc);
                        const float s = gs.at(p.row_sinv, g, F, p);
                        std::uint32_t o = 0;
                        const std::uint8_t code = (p.mx && is_nan(s)) ? Fp8<F>::kNaNCode : cast_scaled_exact<F>(x[k], s, o);
                        ov_row += o;
                        wb[k / 4] |= static_cast<std::uint32_t>(code) << (8 * (k % 4));
                    }
                    w = make_uint2(wb[0], wb[1]);
                } else {
                    const float s = __uint_as_float(cells[((lr0 + j) >> p.br_log2) * row_cc + (lc0 >> p.bc_log2)]);
                    w = cast_run<F>(x, s, rmax[j], rnf >> j & 1u, p.mx, ov_row);
                }
                const int n = run_length(p.cols - c0);
                store_run(p.row_codes + r * p.cols + c0, w, n, p.row_vec_store);
            }
        }
        if (want_col) {
            GridScale gs;
#pragma unroll
            for (int k = 0; k < 8; ++k) {
                const std::int64_t c = c0 + k;
                if (c >= p.cols) continue;
                float x[8];
#pragma unroll
                for (int j = 0; j < 8; ++j) x[j] = v[j][k];
                uint2 w;
                if constexpr (S == ScaleSource::Grid) {
                    std::uint32_t wb[2] = {0, 0};
#pragma unroll
                    for (int j = 0; j < 8; ++j) {
                        const std::int64_t r = r0 + j;
                        if (r >= p.rows) continue;
                        // x^T (C, R) in blocks br x bc: row c / br, column r / bc
                        const std::int64_t g = p.col_grid.index(c / p.br, r / p.bc);
                        const float s = gs.at(p.col_sinv, g, F, p);
                        std::uint32_t o = 0;
                        const std::uint8_t code = (p.mx && is_nan(s)) ? Fp8<F>::kNaNCode : cast_scaled_exact<F>(x[j], s, o);
                        ov_col += o;
                        wb[j / 4] |= static_cast<std::uint32_t>(code) << (8 * (j % 4));
                    }
                    w = make_uint2(wb[0], wb[1]);
                } else {
                    const float s =
                        __uint_as_float(cells[n_row_cells + (lr0 >> p.bc_log2) * col_cc + ((lc0 + k) >> p.br_log2)]);
                    w = cast_run<F>(x, s, cmax[k], cnf >> k & 1u, p.mx, ov_col);
                }
                const int n = run_length(p.rows - r0);
                store_run(p.col_codes + c * p.rows + r0, w, n, p.col_vec_store);
            }
        }
    }

    cast_epilogue(p, lane, ov_row, ov_col, p.fuse_amax, amax_bits);
}

// The grid of a cast over all of x: a CTA per tile column and row (rows past 65535 tiles
// loop in their CTA).
inline dim3 tile_grid(const TileParams& p) {
    const std::int64_t tiles_r = (p.rows + kTile - 1) / kTile;
    return dim3(static_cast<unsigned>((p.cols + kTile - 1) / kTile),
                static_cast<unsigned>(tiles_r < 65535 ? tiles_r : 65535));
}

template <class In, Format F>
void launch_tile(const TileParams& p, ScaleSource s, cudaStream_t stream) {
    switch (s) {
    case ScaleSource::Cells:
        cast_tile_kernel<In, F, ScaleSource::Cells>
            <<<tile_grid(p), kTileThreads, tile_cells(p.br, p.bc) * sizeof(std::uint32_t), stream>>>(p);
        break;
    case ScaleSource::Grid:
        cast_tile_kernel<In, F, ScaleSource::Grid><<<tile_grid(p), kTileThreads, 0, stream>>>(p);
        break;
    }
}

}  // namespace fp8scope::cuda::qk
