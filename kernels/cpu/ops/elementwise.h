// Elementwise float32 ops: the residual add, the in-place scale of gradient clipping and
// the scaled channels of an outlier injection.
#pragma once

#include <cstdint>

namespace fp8scope::ops {

// out (n) = a + b (out may alias either)
void add(float* out, const float* a, const float* b, std::int64_t n);
// x (n) *= factor
void scale(float* x, float factor, std::int64_t n);
// t (rows,cols): the `count` columns in `index` (rows, with `by_row`) *= factor
void scale_channels(float* t, std::int64_t rows, std::int64_t cols, const std::int32_t* index, int count, bool by_row,
                    float factor);

}  // namespace fp8scope::ops
