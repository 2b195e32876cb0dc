// The float32 -> FP8 rounding used by every hot loop: round to nearest even, subnormals,
// saturating (finite values past max clamp to +-max, Inf too; NaN stays NaN).
// Branch-free so that loops over it vectorize: normal values round in the integer domain
// of their float32 bits (add half an ulp of the FP8 grid, plus one when the kept lsb is
// odd, then truncate), values below the smallest normal round by adding a power of two
// whose float32 ulp is the FP8 subnormal step (the FPU's round-to-nearest-even does the
// work). Exact against encode() in format.cpp, which is its test oracle.
//
// The vector form (simd_kernels.cpp, for AVX2 and AVX-512) takes the same integer and
// float steps lane by lane. Files compiled for one vector ISA define FP8SCOPE_CAST_NS, so
// their copies of these inline functions get a namespace of their own and never stand in
// for another ISA's copies at link time.
#pragma once

#include <bit>
#include <cstdint>

#include "fp8/format.h"

#ifndef FP8SCOPE_CAST_NS
#define FP8SCOPE_CAST_NS base
#endif

namespace fp8scope::cast {
inline namespace FP8SCOPE_CAST_NS {

template <Format F>
struct Traits;

template <>
struct Traits<Format::E4M3> {
    static constexpr int kDrop = 20;                       // float32 mantissa bits dropped
    static constexpr std::uint32_t kMaxBits = 0x43E00000;   // 448
    static constexpr std::uint32_t kMinNormalBits = 0x3C800000;  // 2^-6
    static constexpr float kSubMagic = 16384.0f;            // 2^14: float32 ulp 2^-9
    static constexpr std::uint32_t kRebias = (127 - 7) << 3;  // float32 vs E4M3 bias, in code units
    static constexpr std::uint8_t kMaxCode = 0x7E;
    static constexpr std::uint8_t kNaNCode = 0x7F;
    static constexpr float kSubSteps = 512.0f;              // 1 / 2^-9
};

template <>
struct Traits<Format::E5M2> {
    static constexpr int kDrop = 21;
    static constexpr std::uint32_t kMaxBits = 0x47600000;   // 57344
    static constexpr std::uint32_t kMinNormalBits = 0x38800000;  // 2^-14
    static constexpr float kSubMagic = 128.0f;              // 2^7: float32 ulp 2^-16
    static constexpr std::uint32_t kRebias = (127 - 15) << 2;
    static constexpr std::uint8_t kMaxCode = 0x7B;
    static constexpr std::uint8_t kNaNCode = 0x7E;
    static constexpr float kSubSteps = 65536.0f;            // 1 / 2^-16
};

constexpr std::uint32_t kSignBit = 0x80000000u;
constexpr std::uint32_t kInfBits = 0x7F800000u;

// |y| rounded onto the FP8 grid, as float32 bits, before saturation. For |y| past the
// largest finite float32 the result may exceed kInfBits; callers test NaN input apart.
template <Format F>
inline std::uint32_t round_abs_bits(std::uint32_t a) {
    using T = Traits<F>;
    constexpr std::uint32_t half = (1u << (T::kDrop - 1)) - 1;
    const std::uint32_t normal = (a + half + ((a >> T::kDrop) & 1u)) & ~((1u << T::kDrop) - 1u);
    const float sub = (std::bit_cast<float>(a) + T::kSubMagic) - T::kSubMagic;
    return a < T::kMinNormalBits ? std::bit_cast<std::uint32_t>(sub) : normal;
}

// The saturating cast of y, as the float32 value of its code (decode(cast_code(y))).
// `overflow` is set to 1 when a non-NaN y rounds past max, y = +-Inf included (what
// saturation clamps); callers that count overflow of finite inputs mask out Inf inputs.
template <Format F>
inline float round_sat(float y, std::uint32_t& overflow) {
    using T = Traits<F>;
    const std::uint32_t u = std::bit_cast<std::uint32_t>(y);
    const std::uint32_t a = u & ~kSignBit;
    const std::uint32_t r = round_abs_bits<F>(a);
    const bool over = r > T::kMaxBits && a <= kInfBits;
    overflow = over ? 1u : 0u;
    const std::uint32_t mag = a > kInfBits ? a : (over ? T::kMaxBits : r);
    return std::bit_cast<float>(mag | (u & kSignBit));
}

template <Format F>
inline float round_sat(float y) {
    std::uint32_t unused;
    return round_sat<F>(y, unused);
}

// The saturating cast of y as its FP8 code; NaN gives the canonical NaN with y's sign.
template <Format F>
inline std::uint8_t cast_code(float y, std::uint32_t& overflow) {
    using T = Traits<F>;
    const std::uint32_t u = std::bit_cast<std::uint32_t>(y);
    const std::uint32_t a = u & ~kSignBit;
    const std::uint32_t r = round_abs_bits<F>(a);
    const bool over = r > T::kMaxBits && a <= kInfBits;
    overflow = over ? 1u : 0u;
    // Below min normal, r is k times the subnormal step: k is exact as an integer.
    const std::uint32_t normal_code = (r >> T::kDrop) - T::kRebias;
    const std::uint32_t sub_code = static_cast<std::uint32_t>(std::bit_cast<float>(r) * T::kSubSteps);
    std::uint32_t code = r < T::kMinNormalBits ? sub_code : normal_code;
    code = over ? T::kMaxCode : code;
    code = a > kInfBits ? T::kNaNCode : code;
    return static_cast<std::uint8_t>(code | ((u >> 24) & 0x80u));
}

template <Format F>
inline std::uint8_t cast_code(float y) {
    std::uint32_t unused;
    return cast_code<F>(y, unused);
}

// 2^e as float32 for e in [-149, 127], subnormals included (MX scales reach 2^-127).
inline float pow2(int e) {
    return e >= -126 ? std::bit_cast<float>(static_cast<std::uint32_t>(e + 127) << 23)
                     : std::bit_cast<float>(1u << (e + 149));
}

// Quantize-dequantize of one element: decode(cast(x * s)) * scale_inv, all in float32.
template <Format F>
inline float qdq(float x, float s, float scale_inv) {
    return round_sat<F>(x * s) * scale_inv;
}

}  // inline namespace FP8SCOPE_CAST_NS
}  // namespace fp8scope::cast
