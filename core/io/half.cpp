// IEEE binary16 and bfloat16 <-> float32 on the bits, so the result never depends on the
// FPU's rounding mode or on flush-to-zero settings.
#include "io/half.h"

#include <bit>
#include <cmath>
#include <limits>

namespace fp8scope {

namespace {

// Rounds `value >> shift` to nearest, ties to even (shift in 1..31).
std::uint32_t shift_rne(std::uint32_t value, int shift) {
    std::uint32_t kept = value >> shift;
    std::uint32_t rest = value & ((1u << shift) - 1u);
    std::uint32_t half = 1u << (shift - 1);
    if (rest > half || (rest == half && (kept & 1u))) ++kept;
    return kept;
}

}  // namespace

float half_to_float(std::uint16_t h) {
    std::uint32_t sign = std::uint32_t(h & 0x8000u) << 16;
    std::uint32_t exp = (h >> 10) & 0x1Fu;
    std::uint32_t man = h & 0x3FFu;
    std::uint32_t bits;
    if (exp == 0x1F) {
        bits = sign | 0x7F800000u | (man << 13);  // Inf, or NaN with its payload
    } else if (exp != 0) {
        bits = sign | ((exp + 112u) << 23) | (man << 13);  // rebias 15 -> 127
    } else if (man == 0) {
        bits = sign;
    } else {
        // Subnormal half: normalise; every half subnormal is a float32 normal.
        int e = 113;  // float exponent of 2^-14 before normalising
        while (!(man & 0x400u)) {
            man <<= 1;
            --e;
        }
        bits = sign | (std::uint32_t(e) << 23) | ((man & 0x3FFu) << 13);
    }
    return std::bit_cast<float>(bits);
}

float bf16_to_float(std::uint16_t b) { return std::bit_cast<float>(std::uint32_t(b) << 16); }

std::uint16_t float_to_half(float f) {
    std::uint32_t x = std::bit_cast<std::uint32_t>(f);
    std::uint16_t sign = std::uint16_t((x >> 16) & 0x8000u);
    std::uint32_t ax = x & 0x7FFFFFFFu;
    std::uint32_t exp = ax >> 23;
    std::uint32_t man = ax & 0x7FFFFFu;
    if (exp == 0xFF) {
        if (man == 0) return sign | 0x7C00u;
        return std::uint16_t(sign | 0x7E00u | (man >> 13));  // stays a (quiet) NaN
    }
    int half_exp = int(exp) - 127 + 15;
    if (half_exp >= 31) return sign | 0x7C00u;
    if (half_exp >= 1) {
        // A carry out of the mantissa moves into the exponent, up to Inf: what RNE wants.
        std::uint32_t r = shift_rne((std::uint32_t(half_exp) << 23) | man, 13);
        return std::uint16_t(sign | r);
    }
    // Half subnormal range, in units of 2^-24: value = (1.man) * 2^(exp - 150) / 2^-24.
    int shift = 126 - int(exp);
    if (exp == 0 || shift > 24) return sign;  // below half of 2^-24
    return std::uint16_t(sign | shift_rne(man | 0x800000u, shift));
}

std::uint16_t float_to_bf16(float f) {
    std::uint32_t x = std::bit_cast<std::uint32_t>(f);
    if ((x & 0x7FFFFFFFu) > 0x7F800000u) return std::uint16_t((x >> 16) | 0x0040u);  // quiet NaN
    return std::uint16_t(shift_rne(x, 16));  // sign bit rides along; carry reaches Inf
}

float double_to_float(double d) {
    // Past the midpoint between float32 max and 2^128 the tie goes to Inf (max is odd).
    constexpr double kRoundsToInf = 0x1.ffffffp127;
    constexpr float kMax = std::numeric_limits<float>::max();
    double a = std::fabs(d);
    float sign = d < 0 ? -1.0f : 1.0f;
    if (a >= kRoundsToInf) return sign * std::numeric_limits<float>::infinity();
    if (a > double(kMax)) return sign * kMax;
    return static_cast<float>(d);  // in range (or NaN): the conversion is defined
}

}  // namespace fp8scope
