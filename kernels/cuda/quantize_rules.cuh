// Device copies of the scale rules (core/fp8/scaling.cpp) and of the exact FP8 rounding
// (kernels/cpu/cast.h), for the quantize kernels. Every line mirrors its CPU original so
// the two agree bit for bit; products, quotients and sums go through the _rn intrinsics
// so no FMA contraction or approximate division can creep in. Usable from host code too
// (the same arithmetic), which is how they were checked against the CPU originals.
#pragma once

#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cfloat>
#include <cstdint>
#include <cstring>

#include "fp8/format.h"
#include "fp8/recipe.h"

#define FP8SCOPE_HD __host__ __device__ __forceinline__

namespace fp8scope::cuda::qk {

constexpr std::uint32_t kSignBit = 0x80000000u;
constexpr std::uint32_t kInfBits = 0x7F800000u;
constexpr std::uint32_t kQuietNaNBits = 0x7FC00000u;  // std::numeric_limits<float>::quiet_NaN()

FP8SCOPE_HD std::uint32_t bits_of(float f) {
#ifdef __CUDA_ARCH__
    return __float_as_uint(f);
#else
    std::uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
#endif
}

FP8SCOPE_HD float float_of(std::uint32_t u) {
#ifdef __CUDA_ARCH__
    return __uint_as_float(u);
#else
    float f;
    std::memcpy(&f, &u, 4);
    return f;
#endif
}

FP8SCOPE_HD float mul_rn(float a, float b) {
#ifdef __CUDA_ARCH__
    return __fmul_rn(a, b);
#else
    return a * b;
#endif
}

FP8SCOPE_HD float div_rn(float a, float b) {
#ifdef __CUDA_ARCH__
    return __fdiv_rn(a, b);
#else
    return a / b;
#endif
}

FP8SCOPE_HD float add_rn(float a, float b) {
#ifdef __CUDA_ARCH__
    return __fadd_rn(a, b);
#else
    return a + b;
#endif
}

FP8SCOPE_HD float sub_rn(float a, float b) {
#ifdef __CUDA_ARCH__
    return __fsub_rn(a, b);
#else
    return a - b;
#endif
}

FP8SCOPE_HD bool is_nan(float f) { return (bits_of(f) & ~kSignBit) > kInfBits; }
FP8SCOPE_HD bool is_inf(float f) { return (bits_of(f) & ~kSignBit) == kInfBits; }

// The constants of cast.h's Traits, plus the bound of the hardware path: |y| up to
// kFastMax rounds to a finite code and is not an overflow (E4M3: 464 ties down to 448;
// E5M2: 61440 ties up past 57344, so everything below it).
template <Format F>
struct Fp8;

template <>
struct Fp8<Format::E4M3> {
    static constexpr int kDrop = 20;
    static constexpr std::uint32_t kMaxBits = 0x43E00000;  // 448
    static constexpr std::uint32_t kMinNormalBits = 0x3C800000;
    static constexpr float kSubMagic = 16384.0f;
    static constexpr std::uint32_t kRebias = (127 - 7) << 3;
    static constexpr std::uint8_t kMaxCode = 0x7E;
    static constexpr std::uint8_t kNaNCode = 0x7F;
    static constexpr float kSubSteps = 512.0f;
    static constexpr float kMax = 448.0f;
    static constexpr float kFastMax = 464.0f;
    static constexpr int kEmax = 8;
    static constexpr __nv_fp8_interpretation_t kHw = __NV_E4M3;
};

template <>
struct Fp8<Format::E5M2> {
    static constexpr int kDrop = 21;
    static constexpr std::uint32_t kMaxBits = 0x47600000;  // 57344
    static constexpr std::uint32_t kMinNormalBits = 0x38800000;
    static constexpr float kSubMagic = 128.0f;
    static constexpr std::uint32_t kRebias = (127 - 15) << 2;
    static constexpr std::uint8_t kMaxCode = 0x7B;
    static constexpr std::uint8_t kNaNCode = 0x7E;
    static constexpr float kSubSteps = 65536.0f;
    static constexpr float kMax = 57344.0f;
    static constexpr float kFastMax = 61439.99609375f;  // the float below 61440
    static constexpr int kEmax = 15;
    static constexpr __nv_fp8_interpretation_t kHw = __NV_E5M2;
};

// cast::cast_code: the saturating RNE cast of y to its code; `over` = y rounds past max
// (Inf included, NaN not). NaN gives the canonical NaN with y's sign.
template <Format F>
FP8SCOPE_HD std::uint8_t cast_exact(float y, std::uint32_t& over) {
    using T = Fp8<F>;
    const std::uint32_t u = bits_of(y);
    const std::uint32_t a = u & ~kSignBit;
    constexpr std::uint32_t half = (1u << (T::kDrop - 1)) - 1;
    const std::uint32_t normal = (a + half + ((a >> T::kDrop) & 1u)) & ~((1u << T::kDrop) - 1u);
    const float sub = sub_rn(add_rn(float_of(a), T::kSubMagic), T::kSubMagic);
    const std::uint32_t r = a < T::kMinNormalBits ? bits_of(sub) : normal;
    const bool ov = r > T::kMaxBits && a <= kInfBits;
    over = ov ? 1u : 0u;
    const std::uint32_t normal_code = (r >> T::kDrop) - T::kRebias;
    const std::uint32_t sub_code = static_cast<std::uint32_t>(mul_rn(float_of(r), T::kSubSteps));
    std::uint32_t code = r < T::kMinNormalBits ? sub_code : normal_code;
    code = ov ? T::kMaxCode : code;
    code = a > kInfBits ? T::kNaNCode : code;
    return static_cast<std::uint8_t>(code | ((u >> 24) & 0x80u));
}

// The cast of y = x * s exactly as the CPU computes it, and 1 in `over` when finite x
// overflowed. A NaN product carries the sign x86 gives it (the NaN operand's, x first;
// Inf * 0 gives the negative default NaN); the GPU's product would be a positive NaN.
template <Format F>
FP8SCOPE_HD std::uint8_t cast_scaled_exact(float x, float s, std::uint32_t& over) {
    const float y = mul_rn(x, s);
    std::uint8_t code = cast_exact<F>(y, over);
    if (is_nan(y)) {
        const std::uint32_t sign = is_nan(x) ? bits_of(x) : is_nan(s) ? bits_of(s) : kSignBit;
        code = static_cast<std::uint8_t>(Fp8<F>::kNaNCode | ((sign >> 24) & 0x80u));
    }
    over &= (bits_of(x) & ~kSignBit) < kInfBits ? 1u : 0u;
    return code;
}

#ifdef __CUDACC__
// Two codes (a in the low byte) through the hardware's cvt.rn.satfinite: valid when both
// are non-NaN with |y| <= Fp8<F>::kFastMax (checked exhaustively by the tests).
template <Format F>
__device__ __forceinline__ std::uint32_t cast2_fast(float a, float b) {
    return __nv_cvt_float2_to_fp8x2(make_float2(a, b), __NV_SATFINITE, Fp8<F>::kHw);
}

// The values of two codes (the low 16 bits, first code in the low byte) through
// cvt.rn.f16x2.e4m3x2/e5m2x2: every FP8 value is exact in FP16, and FP16 in float32.
template <Format F>
__device__ __forceinline__ float2 decode2(std::uint32_t two_codes) {
    const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(two_codes), Fp8<F>::kHw);
    return __half22float2(__half2(h));
}
#endif

// cast::pow2: 2^e as float32 for e in [-149, 127].
FP8SCOPE_HD float pow2(int e) {
    return e >= -126 ? float_of(static_cast<std::uint32_t>(e + 127) << 23) : float_of(1u << (e + 149));
}

FP8SCOPE_HD constexpr float fp8_max_of(Format f) { return f == Format::E4M3 ? 448.0f : 57344.0f; }

// compute_scale (scaling.cpp).
FP8SCOPE_HD float compute_scale(float amax, Format f, float eps, bool pow2_scale) {
    if (is_nan(amax)) return 1.0f;
    const float a = amax < eps ? eps : amax;  // std::max(amax, eps)
    if (a == 0.0f || is_inf(a)) return 1.0f;
    float s = div_rn(fp8_max_of(f), a);
    if (is_inf(s)) s = FLT_MAX;
    if (pow2_scale) s = float_of(bits_of(s) & 0xFF800000u);
    return s;
}

// The scale s, scale_inv and E8M0 code of one block from its amax bits. For MX, bits at
// or past Inf mark a block holding NaN or Inf: E8M0 NaN, s and scale_inv NaN.
struct BlockScale {
    float s, scale_inv;
    std::uint8_t e8m0;
};

// MX: e of the CPU's mx_exponent (scaling.cpp), s = 2^-e and scale_inv = 2^e, read off the
// amax's exponent field. The biased exponent E = e + 127 is that field minus emax (plus
// one where RCEIL rounds up), clamped at 0, which is also where a subnormal or zero amax
// lands; a finite amax gives E <= 247, so s = 2^(127-E) is always normal and only
// scale_inv = 2^(E-127) needs the subnormal 2^-127. A quarter of the instructions of
// computing e from the float and then both powers, four times per MX tile and thread.
FP8SCOPE_HD BlockScale mx_block_scale(std::uint32_t amax_bits, Format f, MXRule rule) {
    BlockScale b{};
    if (amax_bits >= kInfBits) {
        b.s = b.scale_inv = float_of(kQuietNaNBits);
        b.e8m0 = kE8M0NaN;
        return b;
    }
    int E = static_cast<int>(amax_bits >> 23) - (f == Format::E4M3 ? 8 : 15) +
            (rule == MXRule::RCeil && (amax_bits & 0x7FFFFFu) > 0x600000u ? 1 : 0);
    E = E < 0 ? 0 : E;
    b.s = float_of(static_cast<std::uint32_t>(254 - E) << 23);
    b.scale_inv = float_of(E > 0 ? static_cast<std::uint32_t>(E) << 23 : 0x00400000u);
    b.e8m0 = static_cast<std::uint8_t>(E);
    return b;
}

FP8SCOPE_HD BlockScale block_scale(std::uint32_t amax_bits, Format f, bool mx, MXRule rule, bool pow2_scale) {
    BlockScale b{};
    if (mx) {
        b = mx_block_scale(amax_bits, f, rule);
    } else {
        b.s = qk::compute_scale(float_of(amax_bits), f, 0.0f, pow2_scale);
        b.scale_inv = div_rn(1.0f, b.s);
        b.e8m0 = 0;
    }
    return b;
}

// DelayedState::push's next scale from the reference amax (prev kept on 0, Inf, NaN and
// on underflow). ldexp is a single rounding: the double product is exact, its rounding to
// float32 is the only one, subnormal results included. |margin| past 400 changes nothing.
FP8SCOPE_HD float delayed_next_scale(float ref, float prev, Format f, int margin) {
    if (is_nan(ref) || is_inf(ref) || ref == 0.0f) return prev;
    const float q = div_rn(fp8_max_of(f), ref);
    const int m = margin < -400 ? -400 : (margin > 400 ? 400 : margin);
    const std::uint64_t p2_bits = static_cast<std::uint64_t>(1023 - m) << 52;  // 2^-m
#ifdef __CUDA_ARCH__
    float s = __double2float_rn(__dmul_rn(static_cast<double>(q), __longlong_as_double(static_cast<long long>(p2_bits))));
#else
    double p2;
    std::memcpy(&p2, &p2_bits, 8);
    float s = static_cast<float>(static_cast<double>(q) * p2);
#endif
    if (is_inf(s)) s = FLT_MAX;
    if (s == 0.0f) return prev;
    return s;
}

}  // namespace fp8scope::cuda::qk
