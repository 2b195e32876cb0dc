// The block-shape cast kernel (block.cuh) instantiated for BF16 (raw bits) input.
#include "cuda/cast/launch.cuh"
#include "cuda/runtime/check.h"

namespace fp8scope::cuda::qk {

void launch_block_bf16(const TileParams& p, Format f, BlockShape b, cudaStream_t stream) {
    if (f == Format::E4M3) launch_block<std::uint16_t, Format::E4M3>(p, b, stream);
    else launch_block<std::uint16_t, Format::E5M2>(p, b, stream);
    FP8SCOPE_CUDA_LAUNCHED();
}

}  // namespace fp8scope::cuda::qk
