// What the analysis of one tensor yields: its statistics and its quantization error under
// every requested recipe, and optionally per-tile maps. Backends compute it
// (Backend::analyze); the CPU's fused passes are in kernels/cpu/analysis.h.
#pragma once

#include <vector>

#include "fp8/recipe.h"
#include "fp8/stats.h"

namespace fp8scope {

// Per-tile figures of one recipe on the analysis' tile grid (TileMaps), row-major.
struct TileMap {
    std::vector<float> scale_inv;       // largest scale_inv of a block in the tile; NaN if none
    std::vector<double> signal, error;  // sum x^2 and sum (x' - x)^2 over the tile (as ErrorStats)
};

// The tile grid of pass 2: tiles of tile_rows x tile_cols (128 x 128 for the usual
// recipes: every block of every recipe lies inside one tile), clipped to the tensor.
struct TileMaps {
    int tile_rows = 0, tile_cols = 0, grid_rows = 0, grid_cols = 0;
    std::vector<float> absmax;     // largest finite |x| per tile
    std::vector<TileMap> recipes;  // one per recipe, in the order asked
};

struct Analysis {
    float scaling_amax = 0;  // NaN-ignoring, Inf-including: the amax scales are set from
    TensorStats tensor;
    std::vector<ErrorStats> errors;  // one per recipe, in the order asked
    TileMaps maps;                   // when asked for (AnalysisExtras::tile_maps)
};

struct AnalysisExtras {
    // Per recipe: the scale a delayed recipe casts with (its history's). Missing or NaN:
    // 1, a first step. Ignored for other recipes.
    std::vector<float> delayed_scales;
    bool tile_maps = false;  // also fill Analysis::maps (no extra pass over the data)
};

}  // namespace fp8scope
