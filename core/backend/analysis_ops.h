// A backend's analysis of a tensor in its memory: what capture computes at a capture
// step, on the device where the tensor lives (only the figures cross to the host).
#pragma once

#include <vector>

#include "backend/output_error.h"
#include "backend/tensor_desc.h"
#include "fp8/analysis.h"
#include "fp8/recipe.h"

namespace fp8scope {

class AnalysisOps {
public:
    virtual ~AnalysisOps() = default;

    // NaN-ignoring, Inf-including max |x| (waits).
    virtual float scaling_amax(const TensorDesc& x) = 0;
    // The full analysis of one tensor (fp8/analysis.h) under `recipes` (waits).
    virtual Analysis analyze(const TensorDesc& x, const std::vector<Recipe>& recipes, const StatsOptions& opt,
                             const AnalysisExtras& extras) = 0;
    // The error sums of `out` against `reference` (same shape and type, row-major; a GEMM's
    // output and the same GEMM of unquantized operands), in double (waits).
    virtual OutputError output_error(const TensorDesc& out, const TensorDesc& reference) = 0;
    // The view's values as float32 on the host, row-major (rows, cols) (waits): for the
    // figures capture computes on the host (a SwiGLU's gate/up alignment).
    virtual std::vector<float> host_values(const TensorDesc& x) = 0;
};

}  // namespace fp8scope
