// Pass 3's first step (analysis_top.cu), run by one block of the kernel that finishes
// pass 2 (analysis.cu): which tiles can hold the top values.
#pragma once

#include "cuda/analysis_kernels.cuh"

namespace fp8scope::cuda::an {

// The k-th largest tile maximum, counting ties (0 when there are fewer than k tiles): a
// radix select, most significant byte first; each round counts the maxima that share the
// bytes chosen so far in 256 bins and keeps the bin where the count from the top reaches k.
// Then the tiles whose maximum reaches it are listed for pass 3 (out->top_tiles of them).
// A thread keeps its first kCached maxima in registers: the rounds read memory once.
constexpr int kCached = 8;

__device__ __forceinline__ void select_top_tiles(const TileStats* tiles, std::int64_t n, int k, unsigned* tile_list,
                                                 Summary* out) {
    __shared__ unsigned bins[256];
    __shared__ unsigned prefix_s, need_s;
    if (threadIdx.x == 0) prefix_s = 0, need_s = unsigned(k);
    __syncthreads();
    const std::int64_t cached_n = std::int64_t(kCached) * blockDim.x;
    unsigned cached[kCached];
#pragma unroll
    for (int i = 0; i < kCached; ++i) {
        const std::int64_t t = threadIdx.x + std::int64_t(i) * blockDim.x;
        cached[i] = t < n ? tiles[t].smax : 0u;
    }
    // Visits every tile's maximum, the cached ones, then the rest from memory; the whole
    // warp calls f (ok: t is a tile).
    auto each = [&](auto&& f) {
#pragma unroll
        for (int i = 0; i < kCached; ++i) {
            const std::int64_t t = threadIdx.x + std::int64_t(i) * blockDim.x;
            f(t < n, t, cached[i]);
        }
        for (std::int64_t base = cached_n; base < n; base += blockDim.x) {
            const std::int64_t t = base + threadIdx.x;
            f(t < n, t, t < n ? tiles[t].smax : 0u);
        }
    };
    if (n >= k) {
        for (int shift = 24; shift >= 0; shift -= 8) {
            for (int b = threadIdx.x; b < 256; b += blockDim.x) bins[b] = 0;
            __syncthreads();
            const unsigned prefix = prefix_s;
            const unsigned high = shift == 24 ? 0u : ~0u << (shift + 8);  // the bytes already chosen
            each([&](bool ok, std::int64_t, unsigned m) {
                // Maxima tend to share their leading bytes: when a warp's counted ones all
                // fall in one bin, one atomic adds them.
                const bool counts = ok && (m & high) == prefix;
                const unsigned bin = (m >> shift) & 255u, active = __ballot_sync(0xffffffffu, counts);
                const int leader = __ffs(active) - 1;
                const unsigned first = __shfl_sync(0xffffffffu, bin, leader < 0 ? 0 : leader);
                if (__all_sync(0xffffffffu, !counts || bin == first)) {
                    if (int(threadIdx.x % 32) == leader) atomicAdd(&bins[bin], __popc(active));
                } else if (counts) {
                    atomicAdd(&bins[bin], 1u);
                }
            });
            __syncthreads();
            if (threadIdx.x < 32) {  // warp 0: lane l holds bins 8l .. 8l+7
                const unsigned lane = threadIdx.x, need = need_s;
                unsigned c[8], mine = 0;
#pragma unroll
                for (int i = 0; i < 8; ++i) mine += c[i] = bins[8 * lane + i];
                unsigned from = mine;  // count in the bins of lanes >= this one
#pragma unroll
                for (int o = 1; o < 32; o <<= 1) {
                    const unsigned t = __shfl_down_sync(0xffffffffu, from, o);
                    if (lane + o < 32) from += t;
                }
                if (from - mine < need && from >= need) {  // the k-th lies in this lane's bins
                    unsigned left = need - (from - mine);
                    int b = -1;
#pragma unroll
                    for (int i = 7; i >= 0; --i) {  // static indices: c stays in registers
                        if (b < 0 && c[i] >= left) b = i;
                        if (b < 0) left -= c[i];
                    }
                    prefix_s = prefix | (unsigned(8 * int(lane) + b) << shift);
                    need_s = left;
                }
            }
            __syncthreads();
        }
    }
    const unsigned threshold = prefix_s;
    if (threadIdx.x == 0) out->top_threshold = threshold;
    each([&](bool ok, std::int64_t t, unsigned m) {
        if (ok && m >= threshold) tile_list[atomicAdd(&out->top_tiles, 1u)] = unsigned(t);
    });
}

}  // namespace fp8scope::cuda::an
