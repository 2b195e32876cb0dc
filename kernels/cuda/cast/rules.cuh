// The device side of the cast rules: core/fp8/cast_rules.h (compiled __host__ __device__
// here) for the exact rounding and the scale rules, plus what only the device has: the
// hardware conversion where it provably agrees with cast_code, and the x86 sign of a NaN
// product. The quantize kernels name the shared rules through qk.
#pragma once

#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "fp8/cast_rules.h"

namespace fp8scope::cuda::qk {

using cast::add_rn;
using cast::bits_of;
using cast::block_scale;
using cast::BlockScale;
using cast::compute_scale;
using cast::delayed_next_scale;
using cast::div_rn;
using cast::float_of;
using cast::is_inf;
using cast::is_nan;
using cast::kInfBits;
using cast::kQuietNaNBits;
using cast::kSignBit;
using cast::mul_rn;
using cast::mx_block_scale;
using cast::pow2;

// The format constants of cast_rules.h, plus the bound of the hardware path: |y| up to
// kFastMax rounds to a finite code and is not an overflow (E4M3: 464 ties down to 448;
// E5M2: 61440 ties up past 57344, so everything below it).
template <Format F>
struct Fp8;

template <>
struct Fp8<Format::E4M3> : cast::Traits<Format::E4M3> {
    static constexpr float kFastMax = 464.0f;
    static constexpr __nv_fp8_interpretation_t kHw = __NV_E4M3;
};

template <>
struct Fp8<Format::E5M2> : cast::Traits<Format::E5M2> {
    static constexpr float kFastMax = 61439.99609375f;  // the float below 61440
    static constexpr __nv_fp8_interpretation_t kHw = __NV_E5M2;
};

// The cast of y = x * s exactly as the CPU computes it, and 1 in `over` when finite x
// overflowed. A NaN product carries the sign x86 gives it (the NaN operand's, x first;
// Inf * 0 gives the negative default NaN); the GPU's product would be a positive NaN.
template <Format F>
FP8SCOPE_HD std::uint8_t cast_scaled_exact(float x, float s, std::uint32_t& over) {
    const float y = mul_rn(x, s);
    std::uint8_t code = cast::cast_code<F>(y, over);
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

}  // namespace fp8scope::cuda::qk
