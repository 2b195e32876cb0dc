// Elementwise float32 ops over flat arrays: the residual add and the in-place scale of
// gradient clipping.
#pragma once

#include <cstdint>

namespace fp8scope::ops {

// out (n) = a + b (out may alias either)
void add(float* out, const float* a, const float* b, std::int64_t n);
// x (n) *= factor
void scale(float* x, float factor, std::int64_t n);

}  // namespace fp8scope::ops
