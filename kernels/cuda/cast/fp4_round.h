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

#include <cmath>
#include <cstdint>

#include "fp8/cast_rules.h"

namespace fp8scope::cast {

constexpr std::uint32_t kE2M1MaxBits = 0x40C00000u;  // 6.0f
constexpr std::uint32_t kOneBits = 0x3F800000u;      // 1.0f

// |y| rounded onto the E2M1 grid, as float32 bits, for y that is not NaN (a clamped to 6
// first). What the cast kernels run inside a finite block: a block holding NaN or Inf has
// NaN values and zero codes whatever its q, so they need not map NaN to 0.
FP8SCOPE_HD std::uint32_t e2m1_round_abs_bits_in_block(std::uint32_t a) {
    const std::uint32_t m = a < kE2M1MaxBits ? a : kE2M1MaxBits;
    const std::uint32_t e = (m & kInfBits) + (22u << 23);  // 2^22 x 2^e
    const float magic = float_of(e > 0x4A800000u ? e : 0x4A800000u);
    return bits_of(sub_rn(add_rn(float_of(m), magic), magic));
}

// The same for every y, NaN to 0; `clamped` as e2m1_code's (|y| > 6, Inf included).
FP8SCOPE_HD std::uint32_t e2m1_round_abs_bits(std::uint32_t a, std::uint32_t& clamped) {
    clamped = a > kE2M1MaxBits && a <= kInfBits ? 1u : 0u;
    return a > kInfBits ? 0u : e2m1_round_abs_bits_in_block(a);
}

// The E2M1 code of a rounded |y| r with y's sign bits u.
FP8SCOPE_HD std::uint8_t e2m1_code_of_rounded(std::uint32_t r, std::uint32_t u) {
    const std::uint32_t index = r >= kOneBits ? (r >> 22) - 0xFCu : (r != 0 ? 1u : 0u);
    return static_cast<std::uint8_t>(index | ((u >> 28) & kE2M1Sign));
}

// decode(e2m1_code(y)): the rounded value with y's sign.
FP8SCOPE_HD float e2m1_round(float y, std::uint32_t& clamped) {
    const std::uint32_t u = bits_of(y);
    return float_of(e2m1_round_abs_bits(u & ~kSignBit, clamped) | (u & kSignBit));
}

// e2m1_code(y) from the same rounding.
FP8SCOPE_HD std::uint8_t e2m1_code_fast(float y, std::uint32_t& clamped) {
    const std::uint32_t u = bits_of(y);
    return e2m1_code_of_rounded(e2m1_round_abs_bits(u & ~kSignBit, clamped), u);
}

// m in [0, 8) rounded to nearest even at E2M1's step in its binade: 2^-1 below 2, 1, 2. The
// magic number is the binade (at least 1) times 2^22, whose ulp is that step; an FMA adds
// it to m exactly and rounds once, another takes it off exactly (two instructions where a
// multiply, an add and a subtract were three).
FP8SCOPE_HD float e2m1_round_nonnegative_below8(float m, std::uint32_t binade) {
    const float b = float_of(binade > kOneBits ? binade : kOneBits);
    return fma_rn(b, -0x1p22f, fma_rn(b, 0x1p22f, m));
}

// e2m1_round_in_block's value with more of its work on the FMA pipe, for kernels bound by
// the integer one: min(|y|, 6) as a float min, then e2m1_round_nonnegative_below8. The same
// bits for every y but NaN.
FP8SCOPE_HD float e2m1_round_in_block_fp(float y) {
    const float m = fminf(fabsf(y), 6.0f);
    return float_of(bits_of(e2m1_round_nonnegative_below8(m, bits_of(m) & kInfBits)) | (bits_of(y) & kSignBit));
}

// |e2m1_round_in_block_fp(y)| for |y| < 7 without the clamp: up from 4 the step is 2, so
// [6, 7) rounds to 6 as the clamp would have it. What the cast kernels run where no
// element of a block reaches 7 (all but blocks of tiny scales); the sign goes on later,
// two elements at a time.
FP8SCOPE_HD float e2m1_round_magnitude_below7(float y) {
    return e2m1_round_nonnegative_below8(fabsf(y), bits_of(y) & kInfBits);
}

// 1 where |y| > 6 (a clamped element), else 0, on the FMA pipe: |y| 2^22 - 6 2^22 is exact
// and at least 2 above 6 (whose ulp is 2^-21), saturated to [0, 1]. y not NaN.
FP8SCOPE_HD float e2m1_clamped_indicator(float y) {
#ifdef __CUDA_ARCH__
    return __saturatef(__fmaf_rn(fabsf(y), 0x1p22f, -6.0f * 0x1p22f));
#else
    const float d = std::fma(std::fabs(y), 0x1p22f, -6.0f * 0x1p22f);
    return d <= 0.0f ? 0.0f : (d >= 1.0f ? 1.0f : d);
#endif
}

// e2m1_round and e2m1_code_fast inside a finite block (y not NaN).
FP8SCOPE_HD float e2m1_round_in_block(float y) {
    const std::uint32_t u = bits_of(y);
    return float_of(e2m1_round_abs_bits_in_block(u & ~kSignBit) | (u & kSignBit));
}

FP8SCOPE_HD std::uint8_t e2m1_code_in_block(float y) {
    const std::uint32_t u = bits_of(y);
    return e2m1_code_of_rounded(e2m1_round_abs_bits_in_block(u & ~kSignBit), u);
}

// Stochastic rounding inside a finite block (y not NaN), equal to e2m1_code_sr(y, u) and
// its value for every such y and u: the grid point below |y| by truncation (one mantissa
// bit kept from 1 up; 0 or 0.5 below), the step above it as in e2m1_round_abs_bits, and
// e2m1_code_sr's own comparison of u's top 24 bits with the distance scaled to 2^24 steps
// (the scale 2^24 / step a power of two built from the step's bits).
struct E2M1Stochastic {
    std::uint32_t lo_bits, up;  // |q| = lo + up * step
    float value;                // q with y's sign
};

FP8SCOPE_HD E2M1Stochastic e2m1_sr_in_block(float y, std::uint32_t u) {
    const std::uint32_t ybits = bits_of(y), a = ybits & ~kSignBit;
    const std::uint32_t m = a < kE2M1MaxBits ? a : kE2M1MaxBits;
    const std::uint32_t lo = m >= kOneBits ? (m & 0xFFC00000u) : (m >= 0x3F000000u ? 0x3F000000u : 0u);
    const std::uint32_t e = (m & kInfBits) + (22u << 23);
    const std::uint32_t magic = e > 0x4A800000u ? e : 0x4A800000u;  // 2^22 x step
    const float per_step = float_of(0x96800000u - magic);           // 2^47 / magic = 2^24 / step
    const float frac = mul_rn(sub_rn(float_of(m), float_of(lo)), per_step);
    const std::uint32_t up = static_cast<float>(u >> 8) < frac ? 1u : 0u;
    const float mag = up ? add_rn(float_of(lo), float_of(magic - (23u << 23))) : float_of(lo);
    return {lo, up, float_of(bits_of(mag) | (ybits & kSignBit))};
}

FP8SCOPE_HD std::uint8_t e2m1_code_sr_in_block(float y, std::uint32_t u) {
    const E2M1Stochastic r = e2m1_sr_in_block(y, u);
    return static_cast<std::uint8_t>(e2m1_code_of_rounded(r.lo_bits, bits_of(y)) + r.up);
}

}  // namespace fp8scope::cast
