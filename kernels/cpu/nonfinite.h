// The CPU's scan for a NaN or Inf (backend/nonfinite_ops.h).
#pragma once

#include <cstdint>

#include "backend/tensor_desc.h"

namespace fp8scope {

// The index of the first NaN or Inf of the n values at `data` (F32 or BF16 bits), -1 if
// every one is finite. A pass without branches per element (the largest exponent field of
// each chunk) finds whether a chunk holds one; only that chunk is searched element by element.
std::int64_t first_nonfinite(const void* data, DType dtype, std::int64_t n);

}  // namespace fp8scope
