// The CPU backend's cast of a GEMM operand under an FP4 quantizer (NVFP4, MXFP4): float32
// copies holding x' = (decode(q) * s_b) * S_dec exactly, as quantize_fp4 gives them.
//   rowwise     x quantized along its rows, never transformed
//   columnwise  x^T quantized along its rows (x's columns), after the random Hadamard
//               transform under the transformed tensor's own amax when the quantizer
//               has rht (what the wgrad GEMM reads); 16x16 tiles without rht: the
//               transpose of the rowwise copy (Transformer Engine's 2D weight layout)
// sr keys the rowwise copy's bits with spec.rounding, the columnwise copy's with its
// tensor | 1.
#pragma once

#include <vector>

#include "backend/fp8_ops.h"

namespace fp8scope {

// Casts x (float32 on the CPU) under spec (an FP4 quantizer) into the given buffers,
// grown as needed; fills spec.report and spec.amax_out from the rowwise cast when there
// is one (amax of x, scale NaN as for block recipes, overflow of the rowwise copy).
GemmOperand cast_fp4(const TensorDesc& x, const CastSpec& spec, std::vector<float>& rowwise,
                     std::vector<float>& columnwise);

}  // namespace fp8scope
