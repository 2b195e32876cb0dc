// The tile cast kernel instantiated for BF16 (raw bits) input: 2 formats x 2 scale sources.
#include <algorithm>

#include "cuda/check.h"
#include "cuda/quantize_launch.cuh"

namespace fp8scope::cuda::qk {

namespace {

template <Format F>
void launch(const TileParams& p, ScaleSource s, cudaStream_t stream) {
    const dim3 grid(static_cast<unsigned>((p.cols + kTile - 1) / kTile),
                    static_cast<unsigned>(std::min<std::int64_t>((p.rows + kTile - 1) / kTile, 65535)));
    switch (s) {
    case ScaleSource::Cells:
        cast_tile_kernel<std::uint16_t, F, ScaleSource::Cells>
            <<<grid, kTileThreads, tile_cells(p.br, p.bc) * sizeof(std::uint32_t), stream>>>(p);
        break;
    case ScaleSource::Grid:
        cast_tile_kernel<std::uint16_t, F, ScaleSource::Grid><<<grid, kTileThreads, 0, stream>>>(p);
        break;
    }
    FP8SCOPE_CUDA_LAUNCHED();
}

}  // namespace

void launch_tile_bf16(const TileParams& p, Format f, ScaleSource s, cudaStream_t stream) {
    if (f == Format::E4M3) launch<Format::E4M3>(p, s, stream);
    else launch<Format::E5M2>(p, s, stream);
}

}  // namespace fp8scope::cuda::qk
