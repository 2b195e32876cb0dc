// Programmatic dependent launch (Hopper): a kernel started with launch_dependent() may
// begin while the kernel before it in the stream is still running, so its launch and its
// first loads hide in that kernel's tail instead of following it. Such a kernel calls
// wait_prior_grid() before it touches anything the kernel before wrote (or writes); a
// kernel calls allow_dependents() from where a successor may start. Both are no-ops in a
// kernel launched the usual way, and the launch falls back to plain stream order when
// the kernel before is not a kernel.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <utility>

#include "cuda/runtime/check.h"

namespace fp8scope::cuda {

__device__ __forceinline__ void wait_prior_grid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

__device__ __forceinline__ void allow_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

template <class... Params, class... Args>
void launch_dependent(void (*kernel)(Params...), dim3 grid, dim3 block, std::size_t smem, cudaStream_t stream,
                      Args&&... args) {
    cudaLaunchAttribute attr{};
    attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr.val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t cfg{};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = stream;
    cfg.attrs = &attr;
    cfg.numAttrs = 1;
    FP8SCOPE_CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...));
}

}  // namespace fp8scope::cuda
