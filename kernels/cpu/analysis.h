// The full analysis of one tensor on the CPU: its statistics and its quantization error
// under every requested recipe, computed in fused, vectorized passes over row panels
// (threads over panels) without materializing codes. Partial sums are combined in panel
// order, so they do not depend on the thread count. Figures agree with quantize() +
// error_stats() up to float64 summation order.
#pragma once

#include <vector>

#include "fp8/analysis.h"
#include "tensor.h"

namespace fp8scope {

Analysis analyze(MatrixView x, const std::vector<Recipe>& recipes, const StatsOptions& opt = {},
                 const AnalysisExtras& extras = {});

}  // namespace fp8scope
