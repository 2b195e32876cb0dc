// IEEE half and bfloat16 to float32 (exact) and back (round-to-nearest-even), and
// float64 to float32.
#pragma once

#include <cstdint>

namespace fp8scope {

float half_to_float(std::uint16_t h);
float bf16_to_float(std::uint16_t b);
std::uint16_t float_to_half(float f);
std::uint16_t float_to_bf16(float f);
// Round-to-nearest-even; finite values past the float32 range become +-Inf (or +-max
// when they round to it), without the undefined behaviour of a plain cast.
float double_to_float(double d);

}  // namespace fp8scope
