// The top values' threshold (pass 3, top.cu): a block-wide select, run by the
// block that finishes pass 1 (analysis.cu).
#pragma once

#include "cuda/analysis/kernels.cuh"

namespace fp8scope::cuda::an {

// The k-th largest of the values the block's threads hold (`mine` where `has`), in every
// thread; 0 when fewer than k threads have one. A radix select, most significant byte
// first: each round counts the values that share the bytes chosen so far in 256 bins and
// keeps the bin where the count from the top reaches k.
__device__ __forceinline__ unsigned kth_largest(unsigned mine, bool has, int k) {
    __shared__ unsigned bins[256];
    __shared__ unsigned prefix_s, need_s;
    if (threadIdx.x == 0) prefix_s = 0, need_s = unsigned(k);
    if (__syncthreads_count(has) >= k) {
        for (int shift = 24; shift >= 0; shift -= 8) {
            for (int b = threadIdx.x; b < 256; b += blockDim.x) bins[b] = 0;
            __syncthreads();
            const unsigned prefix = prefix_s;
            const unsigned high = shift == 24 ? 0u : ~0u << (shift + 8);  // the bytes already chosen
            // Values tend to share their leading bytes: when a warp's counted ones all fall
            // in one bin, one atomic adds them.
            const bool counts = has && (mine & high) == prefix;
            const unsigned bin = (mine >> shift) & 255u, active = __ballot_sync(0xffffffffu, counts);
            const int leader = __ffs(active) - 1;
            const unsigned first = __shfl_sync(0xffffffffu, bin, leader < 0 ? 0 : leader);
            if (__all_sync(0xffffffffu, !counts || bin == first)) {
                if (int(threadIdx.x % 32) == leader) atomicAdd(&bins[bin], __popc(active));
            } else if (counts) {
                atomicAdd(&bins[bin], 1u);
            }
            __syncthreads();
            if (threadIdx.x < 32) {  // warp 0: lane l holds bins 8l .. 8l+7
                const unsigned lane = threadIdx.x, need = need_s;
                unsigned c[8], own = 0;
#pragma unroll
                for (int i = 0; i < 8; ++i) own += c[i] = bins[8 * lane + i];
                unsigned from = own;  // count in the bins of lanes >= this one
#pragma unroll
                for (int o = 1; o < 32; o <<= 1) {
                    const unsigned t = __shfl_down_sync(0xffffffffu, from, o);
                    if (lane + o < 32) from += t;
                }
                if (from - own < need && from >= need) {  // the k-th lies in this lane's bins
                    unsigned left = need - (from - own);
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
    return prefix_s;
}

}  // namespace fp8scope::cuda::an
