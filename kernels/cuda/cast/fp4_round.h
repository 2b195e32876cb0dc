// E2M1 rounding to nearest by integer arithmetic on the float32 bits: what the FP4 cast
// kernels run per element in place of cast::e2m1_code's seven comparisons, and the rounded
// value itself (decode(e2m1_code(y))) without building it from the code. Equal to
// e2m1_code and e2m1_value(e2m1_code) for every float32 y, NaN included (index 0), which
// tests/cuda/test_cuda_fp4_round.cpp checks over all 2^32 bit patterns on the host.
//
// Below 1 the grid is 0, 0.5, 1: two comparisons. From 1 to 6 the grid keeps one mantissa
// bit, so adding half an ulp of that grid minus one, plus the kept bit (ties to even), and
// truncating rounds |y| in its own bits; the index is then the kept exponent and bit less
// those of 1.0 (0xFC = 0x3F800000 >> 22), plus 2.
#pragma once

#include <cstdint>

#include "fp8/cast_rules.h"

namespace fp8scope::cast {

constexpr std::uint32_t kE2M1MaxBits = 0x40C00000u;  // 6.0f
constexpr std::uint32_t kOneBits = 0x3F800000u;      // 1.0f

// |y| rounded onto the E2M1 grid, as float32 bits (a clamped to 6 first, NaN to 0);
// `clamped` as e2m1_code's (|y| > 6, Inf included).
FP8SCOPE_HD std::uint32_t e2m1_round_abs_bits(std::uint32_t a, std::uint32_t& clamped) {
    clamped = a > kE2M1MaxBits && a <= kInfBits ? 1u : 0u;
    const std::uint32_t m = a > kInfBits ? 0u : (a < kE2M1MaxBits ? a : kE2M1MaxBits);
    const std::uint32_t big = (m + 0x1FFFFFu + ((m >> 22) & 1u)) & 0xFFC00000u;
    const float f = float_of(m);
    const std::uint32_t small = (f > 0.25f ? 0x3F000000u : 0u) + (f >= 0.75f ? 0x00800000u : 0u);
    return m >= kOneBits ? big : small;
}

// decode(e2m1_code(y)): the rounded value with y's sign.
FP8SCOPE_HD float e2m1_round(float y, std::uint32_t& clamped) {
    const std::uint32_t u = bits_of(y);
    return float_of(e2m1_round_abs_bits(u & ~kSignBit, clamped) | (u & kSignBit));
}

// e2m1_code(y) from the same rounding.
FP8SCOPE_HD std::uint8_t e2m1_code_fast(float y, std::uint32_t& clamped) {
    const std::uint32_t u = bits_of(y);
    const std::uint32_t r = e2m1_round_abs_bits(u & ~kSignBit, clamped);
    const std::uint32_t index = r >= kOneBits ? (r >> 22) - 0xFCu : (r != 0 ? 1u : 0u);
    return static_cast<std::uint8_t>(index | ((u >> 28) & kE2M1Sign));
}

}  // namespace fp8scope::cast
