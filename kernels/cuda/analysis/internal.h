// The launchers of the analysis passes (analysis.cu drives them); device pointers only,
// all asynchronous on `stream`.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "backend.h"

namespace fp8scope::cuda::an {

struct Plans;
struct Params;
struct Moments;
struct TileStats;
struct TileError;
struct Summary;

// The view analysed and its grid of 128 x 128 tiles (analysis.h's AnalysisInput).
struct TileInput {
    const void* data = nullptr;
    DType dtype = DType::F32;
    std::int64_t rows = 0, cols = 0;
    bool transposed = false;
    bool vec_load = false;  // data is 16-byte aligned (16-byte runs where the stride allows)
    std::int64_t grid_rows = 0, grid_cols = 0;
    std::int64_t tiles() const { return grid_rows * grid_cols; }
};

// Pass 2: per-tile statistics and error sums; takes the maxima per channel into channel
// (cols, |x| bits), which must start at zero.
void launch_tiles(const TileInput& in, const Plans& plans, const Params* params, TileStats* tile_stats,
                  TileError* tile_errors, unsigned* channel, cudaStream_t stream);

// Between passes 1 and 2, when an FP4 quantizer has rht: the transformed view's amax into
// `amax` (device, zeroed), and from it S_enc and S_dec (params s, si) of the NVFP4 ones.
void launch_fp4_rht_scales(const TileInput& in, const Plans& plans, Params* params, unsigned* amax,
                           cudaStream_t stream);

// Pass 2 without recipes: the per-tile statistics only, as launch_tiles computes them.
void launch_stats(const TileInput& in, const Params* params, TileStats* tile_stats, unsigned* channel,
                  cudaStream_t stream);

// Pass 3: the top_k largest finite |x| (ties: earlier position first) into summary->top,
// from the tiles listed in `tile_list` (by the kernel that finishes pass 2, analysis.cu);
// `candidates` holds tiles() * kSlices * top_k entries.
void launch_top_values(const TileInput& in, int top_k, const unsigned* tile_list, void* candidates, Summary* summary,
                       cudaStream_t stream);

}  // namespace fp8scope::cuda::an
