// The full analysis of one tensor: its statistics and its quantization error under every
// requested recipe, computed in fused, vectorized passes over row panels (threads over
// panels) without materializing codes. Results equal quantize() + error_stats(); partial
// sums are combined in panel order, so they do not depend on the thread count. Figures
// agree with quantize() + error_stats() up to float64 summation order.
#pragma once

#include <vector>

#include "fp8/recipe.h"
#include "fp8/stats.h"

namespace fp8scope {

struct Analysis {
    TensorStats tensor;
    std::vector<ErrorStats> errors;  // one per recipe, in the order asked
};

Analysis analyze(MatrixView x, const std::vector<Recipe>& recipes, const StatsOptions& opt = {});

}  // namespace fp8scope
