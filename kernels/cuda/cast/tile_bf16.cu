// The tile cast kernel (tile.cuh) instantiated for BF16 (raw bits) input.
#include "cuda/cast/launch.cuh"
#include "cuda/runtime/check.h"

namespace fp8scope::cuda::qk {

void launch_tile_bf16(const TileParams& p, Format f, ScaleSource s, cudaStream_t stream) {
    if (f == Format::E4M3) launch_tile<std::uint16_t, Format::E4M3>(p, s, stream);
    else launch_tile<std::uint16_t, Format::E5M2>(p, s, stream);
    FP8SCOPE_CUDA_LAUNCHED();
}

}  // namespace fp8scope::cuda::qk
