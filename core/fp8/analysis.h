// What the analysis of one tensor yields: its statistics and its quantization error under
// every requested recipe, and optionally per-tile maps. Backends compute it
// (Backend::analyze); the CPU's fused passes are in kernels/cpu/analysis.h.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
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

namespace fp8scope {

// The sums an analysis accumulates over a tensor; every backend finishes its figures from
// them with the functions below, so the definitions of FP8.md live in one place.
struct MomentTotals {  // pass 1: over the finite elements
    double sum = 0, sum2 = 0;
    std::uint32_t amax_bits = 0;         // scaling amax: NaN ignored, Inf included
    std::uint32_t amax_finite_bits = 0;  // finite elements only
    std::int64_t nan = 0, inf = 0;
};

struct CentralTotals {  // pass 2: about the mean, over the finite elements
    double m2 = 0, m4 = 0;
    std::int64_t beyond = 0, zero = 0;       // |x| > k rms; x == 0
    std::uint32_t min_nz_bits = 0x7F800000u;  // least nonzero |x| (Inf bits: none)
};

struct ErrorTotals {  // one recipe, over finite x whose x' is finite
    double sxx = 0, sdd = 0, sqq = 0, sxq = 0, max_err = 0;
    std::int64_t underflow = 0, overflow = 0, nonfinite_out = 0;
    float scale_inv_min = std::numeric_limits<float>::infinity();  // over the blocks cast
    float scale_inv_max = -std::numeric_limits<float>::infinity();
};

// The totals of one recipe from a backend's accumulator that names its fields as
// ErrorTotals does (in its own widths: a device's counters are unsigned).
template <class Sums>
ErrorTotals error_totals(const Sums& s) {
    ErrorTotals e;
    e.sxx = s.sxx;
    e.sdd = s.sdd;
    e.sqq = s.sqq;
    e.sxq = s.sxq;
    e.max_err = s.max_err;
    e.underflow = std::int64_t(s.underflow);
    e.overflow = std::int64_t(s.overflow);
    e.nonfinite_out = std::int64_t(s.nonfinite_out);
    e.scale_inv_min = s.scale_inv_min;
    e.scale_inv_max = s.scale_inv_max;
    return e;
}

// numel, finite, nan, inf, amax, mean and rms from pass 1 (and the histogram's NaN/Inf).
void finish_moments(const MomentTotals& m, std::int64_t numel, TensorStats& t);
// The mean pass 2 centres on: the mean, or 0 without finite elements.
inline double central_mean(const TensorStats& t) { return t.finite ? t.mean : 0.0; }
// zero, min_nonzero_abs, dynamic_range, stddev, kurtosis, beyond-k-rms from pass 2.
void finish_central(const CentralTotals& c, double outlier_k, TensorStats& t);
// The error figures of one recipe; a per-tensor recipe gives its one scale_inv (block
// recipes take their range from the totals).
ErrorStats finish_error(std::string recipe, float scaling_amax, const ErrorTotals& e, const TensorStats& t,
                        std::optional<float> per_tensor_scale_inv);

}  // namespace fp8scope
