// E2M1 rounding to nearest in a few float32 operations: what the FP4 cast kernels run per
// element in place of cast::e2m1_code's seven comparisons, and the rounded value itself
// (decode(e2m1_code(y))) without building it from the code. Equal to e2m1_code and
// e2m1_value(e2m1_code) for every float32 y, NaN included (index 0), which
// tests/cuda/test_cuda_fp4_round.cpp checks over all 2^32 bit patterns on the host.
//
// The E2M1 grid has a fixed step per binade: 0.5 below 2, 1 below 4, 2 up to 6. Adding
// M = 2^22 times that step moves |y| to where float32's own ulp is the step, so the add
// rounds |y| to the grid, ties to even (an even multiple of the step is an even E2M1
// code), and subtracting M again is exact. M comes from |y|'s exponent bits: 2^22 x 2^e
// for |y| in [2^e, 2^e+1), at least 2^22.
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
    const std::uint32_t e = (m & kInfBits) + (22u << 23);  // 2^22 x 2^e
    const float magic = float_of(e > 0x4A800000u ? e : 0x4A800000u);
    return bits_of(sub_rn(add_rn(float_of(m), magic), magic));
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
