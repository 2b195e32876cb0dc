// Internal launchers of the quantize kernels, shared by the .cu files that define them
// (one file per kernel family, so nvcc builds them in parallel) and quantize.cu, which
// dispatches on the recipe.
#pragma once

#include <cuda_runtime.h>

#include "cuda/cast/block.cuh"
#include "cuda/cast/quantize.h"

namespace fp8scope::cuda::qk {

// The tile cast kernel over all of x (tile_f32.cu, tile_bf16.cu).
void launch_tile_f32(const TileParams& p, Format f, ScaleSource s, cudaStream_t stream);
void launch_tile_bf16(const TileParams& p, Format f, ScaleSource s, cudaStream_t stream);
// The block-shape cast kernel over all of x (block_f32.cu, block_bf16.cu).
void launch_block_f32(const TileParams& p, Format f, BlockShape b, cudaStream_t stream);
void launch_block_bf16(const TileParams& p, Format f, BlockShape b, cudaStream_t stream);

// atomicMax of the scaling amax of x into *amax_bits (amax.cu).
void launch_tensor_amax(const CastInput& x, std::uint32_t* amax_bits, cudaStream_t stream);
// Grid source: block amax bits (MX: all ones for NaN/Inf blocks) atomicMax'ed into the
// zeroed scale_inv grids of p, and the tensor amax into p.stats; then, after the cast,
// the grids turned into scale_inv (and E8M0) in place.
void launch_grid_amax(const TileParams& p, DType in, cudaStream_t stream);
void launch_grid_finalize(const TileParams& p, Format f, cudaStream_t stream);

int sm_count();

}  // namespace fp8scope::cuda::qk
