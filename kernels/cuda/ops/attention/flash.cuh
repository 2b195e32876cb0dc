// Fused causal attention for head sizes 64 and 128 (FlashAttention-2 style): tensor-core
// MMA m16n8k16 (BF16 in, float32 accumulation) fed by ldmatrix from swizzled shared
// memory, cp.async double buffering, the online softmax in float32 (base 2, the scale
// 1/sqrt(hs) folded into the exponent), causal block skipping. The (T,T) matrices are
// never materialised. Included by flash.cu only; the launchers there.
//
// Layouts (elements): qkv (B,T,W) = [q|k|v], W = C + 2 NKV hs: query head h at columns
// h*hs, key/value head g at C + g*hs and C + NKV*hs + g*hs; query head h reads key/value
// head h / (NH / NKV) (grouped-query attention; NKV = NH: multi-head); out, dout (B,T,C);
// dqkv like qkv; lse and dsum (B,NH,T) float32; ds: per (b,h) the causal tiles of dS^T
// (below).
//
// Forward (one CTA of 4 warps per 128 query rows of one (b,h), the longest rows first):
// warp w owns rows 32w..32w+31 (two m16 tiles, so every K and V fragment it loads feeds
// two MMAs) and walks the key tiles of 64 from the first to the diagonal, skipping tiles
// wholly above it; keeps O (32 x hs) and the running max and sum in registers (O is
// rescaled only when a row max of the warp moved); writes O and the row logsumexp
// L = ln sum_j exp(s_j / sqrt(hs)).
// Every ldmatrix reads 8 rows of 16 bytes in 8 different bank groups (the swizzle), and
// cp.async fills the next stage of K and V (or Q and dO) while the tensor cores work on
// the current one.
//
// Backward, three kernels:
//   dot: dsum[row] = sum_d dout[row,d] * out[row,d] (float32, the D of FlashAttention).
//   kv:  one CTA of 8 warps per 128 keys of one (b, key/value head); warp w owns keys
//        16w..16w+15 and keeps dK, dV (16 x hs each) in registers while it walks, for each
//        query head of the group in turn, the query tiles of 64 from the diagonal to the
//        end (so a group's dK, dV sum in registers, in a fixed order, with no second pass
//        and no atomics): S^T = K Q^T, P^T = exp2(S^T c - L c), dV += P^T dO,
//        dP^T = V dO^T, dS^T = P^T (dP^T - D), dK += dS^T Q. It stores dS^T (BF16, the
//        operand the dQ product needs anyway) for the dQ kernel.
//   q:   one CTA of 4 warps per 128 query rows: dQ = sum over the key blocks, in increasing
//        order, of dS K. Every output element is written by one thread, summed in an order
//        fixed by the shapes: no atomics, the same bits on every run. (Storing dS costs
//        ~B NH T^2 bytes of scratch and one write and read of it; the alternatives were
//        float atomics (order varies), a second pass recomputing S and dP per query block
//        (+40% FLOPs), or float32 dQ partials per key block (4x the bytes).)
// dS^T tiles: 128 keys x 64 queries, row-major [key][query]; for key block j (keys
// 128j..) the query tiles i = 2j .. nQ-1 (nQ = ceil(T/64)) are stored consecutively,
// tile (i, j) at index j*nQ - j*(j-1) + (i - 2j) of its head (ds_tile_index()).
#pragma once

#include <cmath>
#include <cstdint>

#include "cuda/ops/attention/mma.cuh"

namespace fp8scope::cuda::attn {

using bf16 = std::uint16_t;

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

struct FwdParams {
    const bf16* qkv;
    bf16* out;
    float* lse;
    int T, C, NH, NKV;
    float scale_log2;  // log2(e) / sqrt(hs)
};

struct BwdParams {
    const bf16* qkv;
    const bf16* out;
    const bf16* dout;
    const float* lse;
    bf16* dqkv;
    float* dsum;  // (B,NH,T)
    bf16* ds;     // (B*NH, tiles_per_head, 128, 64)
    std::int64_t rows;  // B*T, for the dot kernel
    std::int64_t tiles_per_head;
    int T, C, NH, NKV;
    float scale;       // 1 / sqrt(hs)
    float scale_log2;  // log2(e) / sqrt(hs)
};

// Query tiles of 64 and key blocks of 128 of a sequence of T.
__host__ __device__ __forceinline__ int ds_query_tiles(int T) { return (T + 63) / 64; }
__host__ __device__ __forceinline__ int ds_key_blocks(int T) { return (T + 127) / 128; }
// Index of the dS^T tile (query tile i, key block j) within its head; with j = key blocks,
// the number of tiles of a head.
__host__ __device__ __forceinline__ std::int64_t ds_tile_index(int nQ, int j, int i) {
    return std::int64_t(j) * nQ - std::int64_t(j) * (j - 1) + (i - 2 * j);
}
constexpr int kDsTile = 128 * 64;  // elements of one dS^T tile

// Element offset of 16-byte chunk `chunk` of row `row` in a tile of rows of W BF16
// (W >= 64): the chunk index is XORed with the row's low 3 bits, so the 8 rows an
// ldmatrix reads (or a warp's cp.async writes) fall in 8 different bank groups.
template <int W>
__device__ __forceinline__ int swz(int row, int chunk) {
    return row * W + ((chunk ^ (row & 7)) << 3);
}

// Rows [row0, row0 + ROWS) of a (T, W) matrix of row stride `stride` into a swizzled
// tile; rows at or past T are zero-filled. Thread `tid` copies chunk tid % (W/8) of rows
// tid / (W/8) + n * THREADS / (W/8): one source pointer and one smem offset per thread,
// moved by whole row groups (the swizzle repeats every 8 rows).
template <int ROWS, int W, int THREADS>
__device__ __forceinline__ void load_tile(bf16* tile, const bf16* src, std::int64_t stride, int row0, int T,
                                          int tid) {
    constexpr int kChunks = W / 8;
    constexpr int kRowsPerPass = THREADS / kChunks;
    static_assert(THREADS % kChunks == 0 && ROWS % kRowsPerPass == 0 && kRowsPerPass % 8 == 0,
                  "tile chunks must divide among the threads");
    const int r = tid / kChunks, c = tid % kChunks;
    const bf16* from = src + std::int64_t(row0 + r) * stride + c * 8;
    bf16* to = tile + swz<W>(r, c);
#pragma unroll
    for (int n = 0; n < ROWS / kRowsPerPass; ++n) {
        const bool ok = row0 + r + n * kRowsPerPass < T;
        cp_async_16(to + n * kRowsPerPass * W, ok ? from + n * kRowsPerPass * stride : src, ok ? 16 : 0);
    }
}

// ldmatrix row addresses (lane l) for the operand shapes used, as byte offsets into a
// swizzled tile of rows of W BF16 (swz_bytes(row, chunk)):
//   A, row-major [m][k] tile:                      row m0 + (l & 15),                  chunk k0/8 + (l >> 4)
//   B = X^T of a row-major [n][k] tile (x4 covers 16 n x 16 k; regs {0,1} n-tile 0, {2,3} n-tile 1):
//                                                  row n0 + ((l >> 4) << 3) + (l & 7), chunk k0/8 + ((l >> 3) & 1)
//   B of a row-major [k][n] tile, .trans (x4 covers 16 k x 16 n; regs {0,1} n-tile 0, {2,3} n-tile 1):
//                                                  row k0 + (((l >> 3) & 1) << 3) + (l & 7), chunk n0/8 + (l >> 4)
//   A of a row-major [k][m] tile (A^T stored), .trans:
//                                                  row k0 + ((l >> 4) << 3) + (l & 7), chunk m0/8 + ((l >> 3) & 1)
// Row steps are multiples of 16 rows (added: `add` of ldsm_x4), chunk steps even (XORed:
// `flip`): the swizzle XORs bits 4-6 of the byte offset with the row's low 3 bits, so with
// rows of 128 or 256 bytes the offset of chunk c0 + 2s is the offset of c0 XOR (s << 5).
template <int W>
__device__ __forceinline__ std::uint32_t swz_bytes(int row, int chunk) {
    return std::uint32_t(row * W * 2 + ((chunk ^ (row & 7)) << 4));
}
template <int W>
__device__ __forceinline__ std::uint32_t off_a(int lane) {
    return swz_bytes<W>(lane & 15, lane >> 4);
}
template <int W>
__device__ __forceinline__ std::uint32_t off_bt(int lane) {
    return swz_bytes<W>(((lane >> 4) << 3) + (lane & 7), (lane >> 3) & 1);
}
template <int W>
__device__ __forceinline__ std::uint32_t off_b(int lane) {
    return swz_bytes<W>((((lane >> 3) & 1) << 3) + (lane & 7), lane >> 4);
}
__host__ __device__ constexpr std::uint32_t rows16(int W) { return std::uint32_t(16 * W * 2); }  // bytes of 16 rows
__device__ __forceinline__ std::uint32_t flip(int step) { return std::uint32_t(step) << 5; }

// The A fragment of k-step kk (columns 16kk..16kk+15) from an accumulator tile c[n][4]
// (the C layout of n-tiles of 8 columns), rounded to BF16.
template <int N>
__device__ __forceinline__ void a_from_acc(std::uint32_t (&a)[4], const float (&c)[N][4], int kk) {
    a[0] = pack_bf16(c[2 * kk][0], c[2 * kk][1]);
    a[1] = pack_bf16(c[2 * kk][2], c[2 * kk][3]);
    a[2] = pack_bf16(c[2 * kk + 1][0], c[2 * kk + 1][1]);
    a[3] = pack_bf16(c[2 * kk + 1][2], c[2 * kk + 1][3]);
}

// One k-step of C += A B over NP pairs of n-tiles for MT m-tiles, the A fragments in
// registers: pair p's B fragments come from one ldmatrix.x4 (.trans when B is a row-major
// [k][n] tile) at `flip0 + p * flip_step` and `add0 + p * add_step` (ldsm_x4), and feed
// the MMAs of every m-tile, so each B fragment loaded serves MT products. The pairs run
// along n within a k-step (flip fixed, add by rows16) or along d (flip by pair, add fixed).
template <bool kTrans, int NP, int MT, int N>
__device__ __forceinline__ void mma_pairs(float (&c)[MT][N][4], const std::uint32_t (&a)[MT][4], std::uint32_t tile,
                                          std::uint32_t offset, std::uint32_t flip0, std::uint32_t flip_step,
                                          std::uint32_t add0, std::uint32_t add_step) {
#pragma unroll
    for (int p = 0; p < NP; ++p) {
        std::uint32_t bb[4];
        if constexpr (kTrans) ldsm_x4_trans(bb, tile, offset, flip0 + p * flip_step, add0 + p * add_step);
        else ldsm_x4(bb, tile, offset, flip0 + p * flip_step, add0 + p * add_step);
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
            mma_bf16(c[mt][2 * p], a[mt], bb[0], bb[1]);
            mma_bf16(c[mt][2 * p + 1], a[mt], bb[2], bb[3]);
        }
    }
}

// The same for one m-tile (the backward kv kernel's warps own 16 keys).
template <bool kTrans, int NP, int N>
__device__ __forceinline__ void mma_pairs(float (&c)[N][4], const std::uint32_t (&a)[4], std::uint32_t tile,
                                          std::uint32_t offset, std::uint32_t flip0, std::uint32_t flip_step,
                                          std::uint32_t add0, std::uint32_t add_step) {
    mma_pairs<kTrans, NP>(reinterpret_cast<float (&)[1][N][4]>(c), reinterpret_cast<const std::uint32_t (&)[1][4]>(a),
                          tile, offset, flip0, flip_step, add0, add_step);
}

// --- forward -------------------------------------------------------------------------------

template <int D>
struct FwdTraits {
    static constexpr int kBlockM = 128, kBlockN = 64, kWarps = 4, kThreads = 32 * kWarps;
    static constexpr int kTileQ = kBlockM * D, kTileKV = kBlockN * D;  // elements
    static constexpr int kSmemBytes = (kTileQ + 4 * kTileKV) * 2;      // Q, K and V twice
};

template <int D>
__global__ void __launch_bounds__(128, 2) flash_forward_kernel(const FwdParams p) {
    using Tr = FwdTraits<D>;
    constexpr int NT = D / 8;                 // n-tiles of a row of O
    constexpr int SN = Tr::kBlockN / 8;       // n-tiles of a row of S
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int g = lane / 4, t = lane % 4;
    const int bh = blockIdx.x, b = bh / p.NH, h = bh % p.NH;
    const int m0 = (gridDim.y - 1 - blockIdx.y) * Tr::kBlockM;  // the longest blocks first
    const int T = p.T;
    const std::int64_t stride = std::int64_t(p.C) + 2 * std::int64_t(p.NKV) * D;
    const bf16* row0 = p.qkv + std::int64_t(b) * T * stride;
    const bf16* q = row0 + h * D;
    const bf16* k = row0 + p.C + (h / (p.NH / p.NKV)) * D;
    const bf16* v = k + p.NKV * D;

    bf16* sQ = reinterpret_cast<bf16*>(dynamic_smem());
    bf16* sK = sQ + Tr::kTileQ;
    bf16* sV = sK + 2 * Tr::kTileKV;

    const int kv_end = T < m0 + Tr::kBlockM ? T : m0 + Tr::kBlockM;
    const int n_tiles = (kv_end + Tr::kBlockN - 1) / Tr::kBlockN;

    load_tile<Tr::kBlockM, D, Tr::kThreads>(sQ, q, stride, m0, T, tid);
    load_tile<Tr::kBlockN, D, Tr::kThreads>(sK, k, stride, 0, T, tid);
    load_tile<Tr::kBlockN, D, Tr::kThreads>(sV, v, stride, 0, T, tid);
    cp_async_commit();

    float o[2][NT][4];
    float mrow[2][2], lrow[2][2];  // running max (scaled, base 2) and this thread's part of the sum
#pragma unroll
    for (int mt = 0; mt < 2; ++mt) {
#pragma unroll
        for (int n = 0; n < NT; ++n) o[mt][n][0] = o[mt][n][1] = o[mt][n][2] = o[mt][n][3] = 0.0f;
        mrow[mt][0] = mrow[mt][1] = -INFINITY;
        lrow[mt][0] = lrow[mt][1] = 0.0f;
    }
    const int r_warp = m0 + warp * 32;  // the warp's first row
    const float c = p.scale_log2;
    const std::uint32_t tQ = smem_u32(sQ), oA = off_a<D>(lane), oBt = off_bt<D>(lane), oB = off_b<D>(lane);

    for (int j = 0; j < n_tiles; ++j) {
        if (j + 1 < n_tiles) {
            const int s = (j + 1) & 1;
            load_tile<Tr::kBlockN, D, Tr::kThreads>(sK + s * Tr::kTileKV, k, stride, (j + 1) * Tr::kBlockN, T, tid);
            load_tile<Tr::kBlockN, D, Tr::kThreads>(sV + s * Tr::kTileKV, v, stride, (j + 1) * Tr::kBlockN, T, tid);
        }
        cp_async_commit();
        cp_async_wait<1>();
        __syncthreads();
        const int n0 = j * Tr::kBlockN;
        if (n0 <= r_warp + 31) {  // some key of the tile is visible to some row of the warp
            const std::uint32_t tK = smem_u32(sK + (j & 1) * Tr::kTileKV);
            const std::uint32_t tV = smem_u32(sV + (j & 1) * Tr::kTileKV);
            float s[2][SN][4];
#pragma unroll
            for (int mt = 0; mt < 2; ++mt)
#pragma unroll
                for (int n = 0; n < SN; ++n) s[mt][n][0] = s[mt][n][1] = s[mt][n][2] = s[mt][n][3] = 0.0f;
            // S = Q K^T (32 x 64 per warp)
#pragma unroll 1
            for (int kk = 0; kk < D / 16; ++kk) {
                std::uint32_t a[2][4];
#pragma unroll
                for (int mt = 0; mt < 2; ++mt) ldsm_x4(a[mt], tQ, oA, flip(kk), (2 * warp + mt) * rows16(D));
                mma_pairs<false, SN / 2>(s, a, tK, oBt, flip(kk), 0, 0, rows16(D));
            }
            if (n0 + Tr::kBlockN - 1 > r_warp) {  // the causal mask cuts the warp's part of the tile
#pragma unroll
                for (int mt = 0; mt < 2; ++mt)
#pragma unroll
                    for (int n = 0; n < SN; ++n)
#pragma unroll
                        for (int e = 0; e < 4; ++e) {
                            const int row = r_warp + mt * 16 + g + (e >> 1) * 8;
                            const int col = n0 + n * 8 + 2 * t + (e & 1);
                            if (col > row) s[mt][n][e] = -INFINITY;
                        }
            }
            // online softmax: the tile's row max over the 4 lanes of a row, then O rescaled
            float nm[2][2];  // -m_new per row half
#pragma unroll
            for (int mt = 0; mt < 2; ++mt)
#pragma unroll
                for (int hf = 0; hf < 2; ++hf) {
                    float mx = -INFINITY;
#pragma unroll
                    for (int n = 0; n < SN; ++n) mx = fmaxf(mx, fmaxf(s[mt][n][2 * hf], s[mt][n][2 * hf + 1]));
                    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
                    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
                    // Key 0 is in the first tile and visible to every row, so m_new is finite
                    // from the first tile on and alpha is 0 there (2^-inf).
                    const float m_new = fmaxf(mrow[mt][hf], mx * c);
                    const float alpha = fast_exp2(mrow[mt][hf] - m_new);
                    mrow[mt][hf] = m_new;
                    nm[mt][hf] = -m_new;
                    lrow[mt][hf] *= alpha;
                    // the max often stays put after the first tiles: rescale only when it moved
                    if (__any_sync(0xffffffffu, alpha != 1.0f)) {
#pragma unroll
                        for (int n = 0; n < NT; ++n) o[mt][n][2 * hf] *= alpha, o[mt][n][2 * hf + 1] *= alpha;
                    }
                }
            // O += P V, 16 keys at a time: P = 2^(S c - m) rounded to BF16 right before its
            // products, so that S's registers free up as the tile goes (64-key tiles fit).
#pragma unroll
            for (int kk = 0; kk < Tr::kBlockN / 16; ++kk) {
                std::uint32_t a[2][4];
#pragma unroll
                for (int mt = 0; mt < 2; ++mt)
#pragma unroll
                    for (int hf = 0; hf < 2; ++hf)
#pragma unroll
                        for (int half = 0; half < 2; ++half) {
                            const float* sv = s[mt][2 * kk + half];
                            const float p0 = fast_exp2(fmaf(sv[2 * hf], c, nm[mt][hf]));
                            const float p1 = fast_exp2(fmaf(sv[2 * hf + 1], c, nm[mt][hf]));
                            lrow[mt][hf] += p0 + p1;
                            a[mt][2 * half + hf] = pack_bf16(p0, p1);
                        }
                mma_pairs<true, D / 16>(o, a, tV, oB, 0, flip(1), kk * rows16(D), 0);
            }
        }
        __syncthreads();  // every warp is done with this stage before it is loaded again
    }

#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int hf = 0; hf < 2; ++hf) {
            float sum = lrow[mt][hf];
            sum += __shfl_xor_sync(0xffffffffu, sum, 1);
            sum += __shfl_xor_sync(0xffffffffu, sum, 2);
            const int row = r_warp + mt * 16 + g + hf * 8;
            if (row < T) {
                const float inv = 1.0f / sum;
                bf16* dst = p.out + (std::int64_t(b) * T + row) * p.C + h * D + 2 * t;
#pragma unroll
                for (int n = 0; n < NT; ++n)
                    *reinterpret_cast<std::uint32_t*>(dst + n * 8) =
                        pack_bf16(o[mt][n][2 * hf] * inv, o[mt][n][2 * hf + 1] * inv);
                if (t == 0) p.lse[std::int64_t(bh) * T + row] = (mrow[mt][hf] + log2f(sum)) * kLn2;
            }
        }
}

// --- backward: D = rowsum(dout * out) --------------------------------------------------------

template <int D>
__global__ void __launch_bounds__(256) flash_backward_dot_kernel(const BwdParams p) {
    constexpr int G = D / 8;  // lanes per (row, head): one 16-byte chunk each
    const std::int64_t idx = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    const std::int64_t item = idx / G;  // (b*T + t) * NH + h
    const int chunk = int(idx % G);
    const bool ok = item < p.rows * p.NH;
    float acc = 0.0f;
    std::int64_t row = 0;
    int h = 0;
    if (ok) {
        row = item / p.NH;
        h = int(item % p.NH);
        const std::int64_t off = row * p.C + h * D + chunk * 8;
        const uint4 x = *reinterpret_cast<const uint4*>(p.out + off);
        const uint4 y = *reinterpret_cast<const uint4*>(p.dout + off);
        const std::uint32_t xs[4] = {x.x, x.y, x.z, x.w}, ys[4] = {y.x, y.y, y.z, y.w};
#pragma unroll
        for (int n = 0; n < 4; ++n) {
            acc = fmaf(__uint_as_float(xs[n] << 16), __uint_as_float(ys[n] << 16), acc);
            acc = fmaf(__uint_as_float(xs[n] & 0xffff0000u), __uint_as_float(ys[n] & 0xffff0000u), acc);
        }
    }
#pragma unroll
    for (int o = G / 2; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
    if (ok && chunk == 0) {
        const std::int64_t b = row / p.T, t = row % p.T;
        p.dsum[(b * p.NH + h) * p.T + t] = acc;
    }
}

// --- backward: dK, dV and dS^T per key block -------------------------------------------------

// One row of 64 BF16 held by the 4 lanes of a quad in the C layout: lane t has, for n-tiles
// 2n and 2n+1, the words (columns 8(2n) + 2t, +1) and (8(2n+1) + 2t, +1) in m[n]. A 4 x 4
// transpose over the quad (two xor steps) gives lane t the n-tiles 2t and 2t+1 whole, which
// it stores as 32 contiguous bytes: the row goes out in full 128-byte lines, not in
// 4-byte pieces that fill half of each sector.
__device__ __forceinline__ void store_row_of_quad(bf16* row, uint2 (&m)[4], int t) {
#pragma unroll
    for (int k = 1; k <= 2; k <<= 1) {
        const bool upper = (t & k) != 0;
#pragma unroll
        for (int c = 0; c < 4; ++c) {
            if (c & k) continue;
            // the lower lane of the pair gives up column c|k, the upper one column c
            const uint2 send = upper ? m[c] : m[c | k];
            uint2 recv;
            recv.x = __shfl_xor_sync(0xffffffffu, send.x, k);
            recv.y = __shfl_xor_sync(0xffffffffu, send.y, k);
            if (upper) m[c] = recv;
            else m[c | k] = recv;
        }
    }
    // m[c] now holds lane c's words of n-tiles 2t (x) and 2t + 1 (y)
    uint4* dst = reinterpret_cast<uint4*>(row + 16 * t);
    dst[0] = make_uint4(m[0].x, m[1].x, m[2].x, m[3].x);
    dst[1] = make_uint4(m[0].y, m[1].y, m[2].y, m[3].y);
}

template <int D>
struct BwdKvTraits {
    static constexpr int kBlockN = 128, kBlockM = 64, kWarps = 8, kThreads = 32 * kWarps;
    static constexpr int kTileKV = kBlockN * D, kTileQ = kBlockM * D;  // elements
    // K, V; Q and dO twice; L and D twice (float32)
    static constexpr int kSmemBytes = (2 * kTileKV + 4 * kTileQ) * 2 + 4 * kBlockM * 4;
};

template <int D>
__global__ void __launch_bounds__(256, 1) flash_backward_kv_kernel(const BwdParams p) {
    using Tr = BwdKvTraits<D>;
    constexpr int NT = D / 8;
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int g = lane / 4, t = lane % 4;
    const int group = p.NH / p.NKV;
    const int b = blockIdx.x / p.NKV, kvh = blockIdx.x % p.NKV;  // the key/value head
    const std::int64_t bh0 = std::int64_t(b) * p.NH + std::int64_t(kvh) * group;  // its first query head
    const int jb = blockIdx.y;  // key block; the first ones have the most query tiles
    const int n0 = jb * Tr::kBlockN;
    const int T = p.T;
    const std::int64_t stride = std::int64_t(p.C) + 2 * std::int64_t(p.NKV) * D;
    const bf16* row0 = p.qkv + std::int64_t(b) * T * stride;
    // query head kvh*group + r at q_group + r*D (dO likewise)
    const bf16* q_group = row0 + std::int64_t(kvh) * group * D;
    const bf16* k = row0 + p.C + kvh * D;
    const bf16* v = k + p.NKV * D;
    const bf16* dout_group = p.dout + std::int64_t(b) * T * p.C + std::int64_t(kvh) * group * D;
    const int nQ = ds_query_tiles(T), i0 = 2 * jb;
    const int per_head = nQ - i0, steps = group * per_head;  // (query head, query tile) pairs
    const std::int64_t ds_first = ds_tile_index(nQ, jb, i0);

    bf16* sK = reinterpret_cast<bf16*>(dynamic_smem());
    bf16* sV = sK + Tr::kTileKV;
    bf16* sQ = sV + Tr::kTileKV;       // 2 stages
    bf16* sdO = sQ + 2 * Tr::kTileQ;   // 2 stages
    float* sL = reinterpret_cast<float*>(sdO + 2 * Tr::kTileQ);  // 2 stages of kBlockM
    float* sD = sL + 2 * Tr::kBlockM;                              // 2 stages of kBlockM

    auto load_stage = [&](int stage, int step) {
        const int hq = step / per_head, r0 = (i0 + step % per_head) * Tr::kBlockM;
        load_tile<Tr::kBlockM, D, Tr::kThreads>(sQ + stage * Tr::kTileQ, q_group + hq * D, stride, r0, T, tid);
        load_tile<Tr::kBlockM, D, Tr::kThreads>(sdO + stage * Tr::kTileQ, dout_group + hq * D, p.C, r0, T, tid);
        // L and D of the tile's rows; 0 past T (those rows have dO = 0, so P (dP - D) = 0)
        if (tid < 2 * Tr::kBlockM) {
            const int r = tid % Tr::kBlockM;
            const bool ok = r0 + r < T;
            const std::int64_t at = (bh0 + hq) * T + (ok ? r0 + r : 0);
            const float* src = (tid < Tr::kBlockM ? p.lse : p.dsum) + at;
            float* dst = (tid < Tr::kBlockM ? sL : sD) + stage * Tr::kBlockM + r;
            cp_async_4(dst, src, ok ? 4 : 0);
        }
    };

    load_tile<Tr::kBlockN, D, Tr::kThreads>(sK, k, stride, n0, T, tid);
    load_tile<Tr::kBlockN, D, Tr::kThreads>(sV, v, stride, n0, T, tid);
    load_stage(0, 0);
    cp_async_commit();

    float dv[NT][4], dk[NT][4];
#pragma unroll
    for (int n = 0; n < NT; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) dv[n][e] = dk[n][e] = 0.0f;
    const int key_w = n0 + 16 * warp;  // the warp's first key
    const float c = p.scale_log2;
    const std::uint32_t tK = smem_u32(sK), tV = smem_u32(sV);
    const std::uint32_t oA = off_a<D>(lane), oBt = off_bt<D>(lane), oB = off_b<D>(lane);

    for (int step = 0; step < steps; ++step) {
        const int st = step & 1;
        if (step + 1 < steps) load_stage(st ^ 1, step + 1);
        cp_async_commit();
        cp_async_wait<1>();
        __syncthreads();
        const int hq = step / per_head, i = i0 + step % per_head;
        const int q0 = i * Tr::kBlockM;
        bf16* ds_head = p.ds + (bh0 + hq) * p.tiles_per_head * kDsTile;
        const std::uint32_t tQ = smem_u32(sQ + st * Tr::kTileQ), tdO = smem_u32(sdO + st * Tr::kTileQ);
        const float* cL = sL + st * Tr::kBlockM;
        const float* cD = sD + st * Tr::kBlockM;
        // row g of this warp's 16 rows of the dS^T tile (keys key_w.., queries q0..q0+63)
        bf16* ds_row = ds_head + (ds_first + (i - i0)) * kDsTile + (16 * warp + g) * 64;
        if (q0 + Tr::kBlockM - 1 >= key_w) {  // some query of the tile sees some key of the warp
            // S^T = K Q^T (16 keys x 64 queries)
            float s[8][4];
#pragma unroll
            for (int n = 0; n < 8; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll 1
            for (int kk = 0; kk < D / 16; ++kk) {
                std::uint32_t a[4];
                ldsm_x4(a, tK, oA, flip(kk), warp * rows16(D));
                mma_pairs<false, 4>(s, a, tQ, oBt, flip(kk), 0, 0, rows16(D));
            }
            // P^T = exp(S^T / sqrt(hs) - L), 0 where the key is after the query
            const bool masked = q0 < key_w + 15;
#pragma unroll
            for (int n = 0; n < 8; ++n)
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const int qc = n * 8 + 2 * t + (e & 1);
                    float x = fast_exp2(fmaf(s[n][e], c, -cL[qc] * kLog2e));
                    if (masked && key_w + g + (e >> 1) * 8 > q0 + qc) x = 0.0f;
                    s[n][e] = x;
                }
            // dV += P^T dO
#pragma unroll
            for (int kq = 0; kq < Tr::kBlockM / 16; ++kq) {
                std::uint32_t a[4];
                a_from_acc(a, s, kq);
                mma_pairs<true, D / 16>(dv, a, tdO, oB, 0, flip(1), kq * rows16(D), 0);
            }
            // dP^T = V dO^T
            float dpt[8][4];
#pragma unroll
            for (int n = 0; n < 8; ++n) dpt[n][0] = dpt[n][1] = dpt[n][2] = dpt[n][3] = 0.0f;
#pragma unroll 1
            for (int kk = 0; kk < D / 16; ++kk) {
                std::uint32_t a[4];
                ldsm_x4(a, tV, oA, flip(kk), warp * rows16(D));
                mma_pairs<false, 4>(dpt, a, tdO, oBt, flip(kk), 0, 0, rows16(D));
            }
            // dS^T = P^T (dP^T - D), rounded to BF16 once: the operand of dK here and of dQ later
            std::uint32_t dsp[8][2];
#pragma unroll
            for (int n = 0; n < 8; ++n) {
                const float d0 = cD[n * 8 + 2 * t], d1 = cD[n * 8 + 2 * t + 1];
                dsp[n][0] = pack_bf16(s[n][0] * (dpt[n][0] - d0), s[n][1] * (dpt[n][1] - d1));
                dsp[n][1] = pack_bf16(s[n][2] * (dpt[n][2] - d0), s[n][3] * (dpt[n][3] - d1));
            }
            // dK += dS^T Q
#pragma unroll
            for (int kq = 0; kq < Tr::kBlockM / 16; ++kq) {
                const std::uint32_t a[4] = {dsp[2 * kq][0], dsp[2 * kq][1], dsp[2 * kq + 1][0], dsp[2 * kq + 1][1]};
                mma_pairs<true, D / 16>(dk, a, tQ, oB, 0, flip(1), kq * rows16(D), 0);
            }
#pragma unroll
            for (int hf = 0; hf < 2; ++hf) {  // keys g and g + 8
                uint2 m[4];
#pragma unroll
                for (int n = 0; n < 4; ++n) m[n] = make_uint2(dsp[2 * n][hf], dsp[2 * n + 1][hf]);
                store_row_of_quad(ds_row + hf * 8 * 64, m, t);
            }
        } else {
            const uint4 zero = make_uint4(0u, 0u, 0u, 0u);
#pragma unroll
            for (int hf = 0; hf < 2; ++hf) {
                uint4* dst = reinterpret_cast<uint4*>(ds_row + hf * 8 * 64 + 16 * t);
                dst[0] = zero, dst[1] = zero;
            }
        }
        __syncthreads();  // every warp is done with this stage before it is loaded again
    }

#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
        const int key = key_w + g + 8 * hf;
        if (key < T) {
            bf16* dst = p.dqkv + (std::int64_t(b) * T + key) * stride + p.C + kvh * D + 2 * t;
#pragma unroll
            for (int n = 0; n < NT; ++n) {
                *reinterpret_cast<std::uint32_t*>(dst + n * 8) =
                    pack_bf16(dk[n][2 * hf] * p.scale, dk[n][2 * hf + 1] * p.scale);
                *reinterpret_cast<std::uint32_t*>(dst + p.NKV * D + n * 8) =
                    pack_bf16(dv[n][2 * hf], dv[n][2 * hf + 1]);
            }
        }
    }
}

// --- backward: dQ = dS K ------------------------------------------------------------------------

template <int D>
struct BwdQTraits {
    static constexpr int kBlockM = 128, kStepN = 64, kWarps = 4, kThreads = 32 * kWarps;
    static constexpr int kTileDs = kStepN * 64;  // 64 keys x 64 queries of one dS^T tile
    static constexpr int kTileK = kStepN * D;
    static constexpr int kStage = 2 * kTileDs + kTileK;      // two query tiles of dS^T, K
    static constexpr int kSmemBytes = 2 * kStage * 2;        // two stages
};

template <int D>
__global__ void __launch_bounds__(128, 2) flash_backward_q_kernel(const BwdParams p) {
    using Tr = BwdQTraits<D>;
    constexpr int NT = D / 8;
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int g = lane / 4, t = lane % 4;
    const int bh = blockIdx.x, b = bh / p.NH, h = bh % p.NH;
    const int ib = gridDim.y - 1 - blockIdx.y;  // 128-row query block; the longest first
    const int m0 = ib * Tr::kBlockM;
    const int T = p.T;
    const std::int64_t stride = std::int64_t(p.C) + 2 * std::int64_t(p.NKV) * D;
    const bf16* k = p.qkv + std::int64_t(b) * T * stride + p.C + (h / (p.NH / p.NKV)) * D;
    const int nQ = ds_query_tiles(T);
    const bf16* ds_head = p.ds + std::int64_t(bh) * p.tiles_per_head * kDsTile;
    // steps of 64 keys: keys [64s, 64s + 64) for s < 2 (ib + 1), and before T
    const int steps = 2 * (ib + 1) < nQ ? 2 * (ib + 1) : nQ;

    bf16* smem = reinterpret_cast<bf16*>(dynamic_smem());

    auto load_stage = [&](int stage, int s) {
        bf16* base = smem + stage * Tr::kStage;
        const int jb = s / 2, half = s % 2;
#pragma unroll
        for (int it = 0; it < 2; ++it) {
            const int i = 2 * ib + it;  // query tile; tile i >= 2 jb exists when i < nQ
            const bool ok = i < nQ;
            const bf16* src = ds_head + (ok ? ds_tile_index(nQ, jb, i) * kDsTile + half * Tr::kTileDs : 0);
            constexpr int kChunks = Tr::kTileDs / 8;
#pragma unroll
            for (int n = 0; n < kChunks / Tr::kThreads; ++n) {
                const int idx = n * Tr::kThreads + tid;
                const int r = idx / 8, ch = idx % 8;
                cp_async_16(base + it * Tr::kTileDs + swz<64>(r, ch), src + (ok ? r * 64 + ch * 8 : 0), ok ? 16 : 0);
            }
        }
        load_tile<Tr::kStepN, D, Tr::kThreads>(base + 2 * Tr::kTileDs, k, stride, s * Tr::kStepN, T, tid);
    };

    load_stage(0, 0);
    cp_async_commit();

    float acc[2][NT][4];
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int n = 0; n < NT; ++n) acc[mt][n][0] = acc[mt][n][1] = acc[mt][n][2] = acc[mt][n][3] = 0.0f;
    const int r_warp = m0 + 32 * warp;
    const int qo = (warp % 2) * 32;  // the warp's first query within its 64-query tile
    const std::uint32_t oS = off_bt<64>(lane), oB = off_b<D>(lane);

    for (int s = 0; s < steps; ++s) {
        if (s + 1 < steps) load_stage((s + 1) & 1, s + 1);
        cp_async_commit();
        cp_async_wait<1>();
        __syncthreads();
        if (s * Tr::kStepN <= r_warp + 31) {  // dS is zero where every key is after every row
            const bf16* base = smem + (s & 1) * Tr::kStage;
            const std::uint32_t tS = smem_u32(base + (warp / 2) * Tr::kTileDs), tK = smem_u32(base + 2 * Tr::kTileDs);
#pragma unroll
            for (int kk = 0; kk < Tr::kStepN / 16; ++kk) {
                std::uint32_t a[2][4];
#pragma unroll
                for (int mt = 0; mt < 2; ++mt)  // A = dS from the stored dS^T, transposed
                    ldsm_x4_trans(a[mt], tS, oS, std::uint32_t(qo / 8 + 2 * mt) << 4, kk * rows16(64));
                mma_pairs<true, D / 16>(acc, a, tK, oB, 0, flip(1), kk * rows16(D), 0);
            }
        }
        __syncthreads();
    }

#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int hf = 0; hf < 2; ++hf) {
            const int row = r_warp + mt * 16 + g + 8 * hf;
            if (row < T) {
                bf16* dst = p.dqkv + (std::int64_t(b) * T + row) * stride + h * D + 2 * t;
#pragma unroll
                for (int n = 0; n < NT; ++n)
                    *reinterpret_cast<std::uint32_t*>(dst + n * 8) =
                        pack_bf16(acc[mt][n][2 * hf] * p.scale, acc[mt][n][2 * hf + 1] * p.scale);
            }
        }
}

}  // namespace fp8scope::cuda::attn
