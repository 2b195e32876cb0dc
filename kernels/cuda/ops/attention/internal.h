// Between the attention entry points (attention.cu) and the fused kernels' launchers
// (flash.cu). Shapes and layouts as in ops/ops.h and flash.cuh.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "cuda/ops/ops.h"

namespace fp8scope::cuda::detail {

struct FlashArgs {
    int B = 0, T = 0, C = 0, NH = 0, NKV = 0, hs = 0;
    int scale_hs = 0;  // the head size of the softmax scale 1/sqrt(scale_hs); 0: hs (else padded heads)
    const bf16* qkv = nullptr;  // (B,T,C + 2 NKV hs)
    bf16* out = nullptr;        // forward: written; backward: read (the forward's output)
    float* lse = nullptr;       // (B,NH,T): forward writes, backward reads
    const bf16* dout = nullptr;
    bf16* dqkv = nullptr;       // like qkv
    float* dsum = nullptr;  // (B,NH,T) scratch of backward
    bf16* ds = nullptr;     // B*NH*flash_ds_tiles_per_head(T) tiles of 128x64, scratch of backward
};

// The head sizes the fused kernels take.
inline bool flash_head_size(int hs) { return hs == 64 || hs == 128; }
// dS^T tiles (128 keys x 64 queries) of one head.
std::int64_t flash_ds_tiles_per_head(int T);

void flash_forward(const FlashArgs& a, cudaStream_t stream);
void flash_backward(const FlashArgs& a, cudaStream_t stream);

}  // namespace fp8scope::cuda::detail
