// Statistics of a tensor (FP8.md) and of the error of an already quantized one, on the CPU.
#pragma once

#include <string>

#include "cpu/quantize.h"
#include "fp8/stats.h"
#include "tensor.h"

namespace fp8scope {

TensorStats tensor_stats(MatrixView x, const StatsOptions& opt = {});
// Error of an already quantized tensor: the simple path, used by the engine's capture.
ErrorStats error_stats(MatrixView x, const QuantizedTensor& q, const std::string& recipe);

}  // namespace fp8scope
