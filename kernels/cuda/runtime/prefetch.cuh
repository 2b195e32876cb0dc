// Prefetches into L2 through the SM's copy engine (TMA): one instruction brings a whole
// run of memory, holds no registers and never blocks, so a kernel can have data it will
// read later (its own next rows) on the way while it works.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace fp8scope::cuda {

// `bytes` (a multiple of 16) from `p` (16-byte aligned) into L2.
__device__ __forceinline__ void prefetch_l2(const void* p, std::uint32_t bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"(p), "r"(bytes) : "memory");
#else
    (void)p, (void)bytes;
#endif
}

}  // namespace fp8scope::cuda
