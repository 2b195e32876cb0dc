// The block-shape cast kernel (block.cuh) instantiated for float32 input.
#include "cuda/cast/launch.cuh"
#include "cuda/runtime/check.h"

namespace fp8scope::cuda::qk {

void launch_block_f32(const TileParams& p, Format f, BlockShape b, cudaStream_t stream) {
    if (f == Format::E4M3) launch_block<float, Format::E4M3>(p, b, stream);
    else launch_block<float, Format::E5M2>(p, b, stream);
    FP8SCOPE_CUDA_LAUNCHED();
}

}  // namespace fp8scope::cuda::qk
