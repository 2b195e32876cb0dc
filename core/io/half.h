// IEEE half and bfloat16 to float32 (exact) and back (round-to-nearest-even).
#pragma once

#include <cstdint>

namespace fp8scope {

float half_to_float(std::uint16_t h);
float bf16_to_float(std::uint16_t b);
std::uint16_t float_to_half(float f);
std::uint16_t float_to_bf16(float f);

}  // namespace fp8scope
