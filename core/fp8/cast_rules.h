// The FP8 cast and scale rules, written once for every backend: the exact saturating
// float32 -> FP8 cast, the per-tensor and blockwise scale, MX's E8M0 exponent and
// delayed scaling's next scale. The CPU compiles them as plain inline C++, nvcc as
// __host__ __device__ functions, so codes and scales agree bit for bit across devices.
// encode() in format.cpp shares nothing with them and is the oracle the tests hold them to.
//
// The cast rounds to nearest even with subnormals and saturates (finite values past max
// clamp to +-max, Inf too; NaN stays NaN). It is branch-free so that loops over it
// vectorize: normal values round in the integer domain of their float32 bits (add half
// an ulp of the FP8 grid, plus one when the kept lsb is odd, then truncate), values below
// the smallest normal round by adding a power of two whose float32 ulp is the FP8
// subnormal step (the FPU's round-to-nearest-even does the work).
//
// Products, quotients and sums go through the _rn helpers, which on the device are the
// _rn intrinsics, so no FMA contraction or approximate division creeps into device code.
// The CPU's vector form of the cast (simd_kernels.cpp) takes the same integer and float
// steps lane by lane; files compiled for one vector ISA define FP8SCOPE_CAST_NS, so their
// copies of these inline functions get a namespace of their own and never stand in for
// another ISA's copies at link time.
#pragma once

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "fp8/format.h"
#include "fp8/recipe.h"

#if defined(__CUDACC__)
#define FP8SCOPE_HD __host__ __device__ __forceinline__
#else
#include <bit>
#define FP8SCOPE_HD inline
#endif

#ifndef FP8SCOPE_CAST_NS
#define FP8SCOPE_CAST_NS base
#endif

namespace fp8scope::cast {
inline namespace FP8SCOPE_CAST_NS {

constexpr std::uint32_t kSignBit = 0x80000000u;
constexpr std::uint32_t kInfBits = 0x7F800000u;
constexpr std::uint32_t kQuietNaNBits = 0x7FC00000u;  // std::numeric_limits<float>::quiet_NaN()

// ---- float32 arithmetic, the same on both sides ------------------------------------------

FP8SCOPE_HD std::uint32_t bits_of(float f) {
#if defined(__CUDA_ARCH__)
    return __float_as_uint(f);
#elif defined(__CUDACC__)
    std::uint32_t u;  // nvcc compiles C++17: no std::bit_cast
    std::memcpy(&u, &f, 4);
    return u;
#else
    return std::bit_cast<std::uint32_t>(f);
#endif
}

FP8SCOPE_HD float float_of(std::uint32_t u) {
#if defined(__CUDA_ARCH__)
    return __uint_as_float(u);
#elif defined(__CUDACC__)
    float f;
    std::memcpy(&f, &u, 4);
    return f;
#else
    return std::bit_cast<float>(u);
#endif
}

#if defined(__CUDA_ARCH__)
FP8SCOPE_HD float mul_rn(float a, float b) { return __fmul_rn(a, b); }
FP8SCOPE_HD float div_rn(float a, float b) { return __fdiv_rn(a, b); }
FP8SCOPE_HD float add_rn(float a, float b) { return __fadd_rn(a, b); }
FP8SCOPE_HD float sub_rn(float a, float b) { return __fsub_rn(a, b); }
FP8SCOPE_HD float fma_rn(float a, float b, float c) { return __fmaf_rn(a, b, c); }
#else
FP8SCOPE_HD float mul_rn(float a, float b) { return a * b; }
FP8SCOPE_HD float div_rn(float a, float b) { return a / b; }
FP8SCOPE_HD float add_rn(float a, float b) { return a + b; }
FP8SCOPE_HD float sub_rn(float a, float b) { return a - b; }
FP8SCOPE_HD float fma_rn(float a, float b, float c) { return std::fma(a, b, c); }
#endif

FP8SCOPE_HD bool is_nan(float f) { return (bits_of(f) & ~kSignBit) > kInfBits; }
FP8SCOPE_HD bool is_inf(float f) { return (bits_of(f) & ~kSignBit) == kInfBits; }

// ---- the formats --------------------------------------------------------------------------

template <Format F>
struct Traits;

template <>
struct Traits<Format::E4M3> {
    static constexpr int kDrop = 20;                             // float32 mantissa bits dropped
    static constexpr std::uint32_t kMaxBits = 0x43E00000;        // 448
    static constexpr std::uint32_t kMinNormalBits = 0x3C800000;  // 2^-6
    static constexpr float kSubMagic = 16384.0f;                 // 2^14: float32 ulp 2^-9
    static constexpr std::uint32_t kRebias = (127 - 7) << 3;     // float32 vs E4M3 bias, in code units
    static constexpr std::uint8_t kMaxCode = 0x7E;
    static constexpr std::uint8_t kNaNCode = 0x7F;
    static constexpr float kSubSteps = 512.0f;  // 1 / 2^-9
};

template <>
struct Traits<Format::E5M2> {
    static constexpr int kDrop = 21;
    static constexpr std::uint32_t kMaxBits = 0x47600000;        // 57344
    static constexpr std::uint32_t kMinNormalBits = 0x38800000;  // 2^-14
    static constexpr float kSubMagic = 128.0f;                   // 2^7: float32 ulp 2^-16
    static constexpr std::uint32_t kRebias = (127 - 15) << 2;
    static constexpr std::uint8_t kMaxCode = 0x7B;
    static constexpr std::uint8_t kNaNCode = 0x7E;
    static constexpr float kSubSteps = 65536.0f;  // 1 / 2^-16
};

// fp8_max and FormatInfo::emax (format.h) in a form device code can call.
FP8SCOPE_HD constexpr float max_of(Format f) { return f == Format::E4M3 ? 448.0f : 57344.0f; }
FP8SCOPE_HD constexpr int emax_of(Format f) { return f == Format::E4M3 ? 8 : 15; }

// ---- the cast -------------------------------------------------------------------------------

// |y| rounded onto the FP8 grid, as float32 bits, before saturation. For |y| past the
// largest finite float32 the result may exceed kInfBits; callers test NaN input apart.
template <Format F>
FP8SCOPE_HD std::uint32_t round_abs_bits(std::uint32_t a) {
    using T = Traits<F>;
    constexpr std::uint32_t half = (1u << (T::kDrop - 1)) - 1;
    const std::uint32_t normal = (a + half + ((a >> T::kDrop) & 1u)) & ~((1u << T::kDrop) - 1u);
    const float sub = sub_rn(add_rn(float_of(a), T::kSubMagic), T::kSubMagic);
    return a < T::kMinNormalBits ? bits_of(sub) : normal;
}

// y's bits u, |y|'s bits a and |y| rounded (r, round_abs_bits), and whether a non-NaN y
// rounds past max (`overflow` gets it as 0 or 1): the start of round_sat.
struct Rounded {
    std::uint32_t u, a, r;
    bool over;
};

template <Format F>
FP8SCOPE_HD Rounded round_parts(float y, std::uint32_t& overflow) {
    Rounded x;
    x.u = bits_of(y);
    x.a = x.u & ~kSignBit;
    x.r = round_abs_bits<F>(x.a);
    x.over = x.r > Traits<F>::kMaxBits && x.a <= kInfBits;
    overflow = x.over ? 1u : 0u;
    return x;
}

// The saturating cast of y, as the float32 value of its code (decode(cast_code(y))).
// `overflow` is set to 1 when a non-NaN y rounds past max, y = +-Inf included (what
// saturation clamps); callers that count overflow of finite inputs mask out Inf inputs.
template <Format F>
FP8SCOPE_HD float round_sat(float y, std::uint32_t& overflow) {
    const Rounded x = round_parts<F>(y, overflow);
    const std::uint32_t mag = x.a > kInfBits ? x.a : (x.over ? Traits<F>::kMaxBits : x.r);
    return float_of(mag | (x.u & kSignBit));
}

template <Format F>
FP8SCOPE_HD float round_sat(float y) {
    std::uint32_t unused;
    return round_sat<F>(y, unused);
}

// The saturating cast of y as its FP8 code; NaN gives the canonical NaN with y's sign.
template <Format F>
FP8SCOPE_HD std::uint8_t cast_code(float y, std::uint32_t& overflow) {
    using T = Traits<F>;
    const std::uint32_t u = bits_of(y);
    const std::uint32_t a = u & ~kSignBit;
    const std::uint32_t r = round_abs_bits<F>(a);
    const bool over = r > T::kMaxBits && a <= kInfBits;
    overflow = over ? 1u : 0u;
    // Below min normal, r is k times the subnormal step: k is exact as an integer.
    // (Written out rather than through round_parts: nvcc schedules the struct form into
    // different, if shorter, SASS for the cast kernels.)
    const std::uint32_t normal_code = (r >> T::kDrop) - T::kRebias;
    const std::uint32_t sub_code = static_cast<std::uint32_t>(mul_rn(float_of(r), T::kSubSteps));
    std::uint32_t code = r < T::kMinNormalBits ? sub_code : normal_code;
    code = over ? T::kMaxCode : code;
    code = a > kInfBits ? T::kNaNCode : code;
    return static_cast<std::uint8_t>(code | ((u >> 24) & 0x80u));
}

template <Format F>
FP8SCOPE_HD std::uint8_t cast_code(float y) {
    std::uint32_t unused;
    return cast_code<F>(y, unused);
}

// 2^e as float32 for e in [-149, 127], subnormals included (MX scales reach 2^-127).
FP8SCOPE_HD float pow2(int e) {
    return e >= -126 ? float_of(static_cast<std::uint32_t>(e + 127) << 23) : float_of(1u << (e + 149));
}

// Quantize-dequantize of one element: decode(cast(x * s)) * scale_inv, all in float32.
template <Format F>
FP8SCOPE_HD float qdq(float x, float s, float scale_inv) {
    return mul_rn(round_sat<F>(mul_rn(x, s)), scale_inv);
}

// ---- the scale rules (FP8.md) -------------------------------------------------------------------

// Per-tensor current and blockwise: s = fp8_max / max(amax, eps); amax NaN, or an
// eps-clamped amax of 0 or Inf, gives 1; a quotient past FLT_MAX clamps to FLT_MAX; pow2
// clears the mantissa (rounds down).
FP8SCOPE_HD float compute_scale(float amax, Format f, float eps, bool pow2_scale) {
    if (is_nan(amax)) return 1.0f;
    const float a = amax < eps ? eps : amax;  // std::max(amax, eps)
    if (a == 0.0f || is_inf(a)) return 1.0f;
    float s = div_rn(max_of(f), a);
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

// MX: the E8M0 code E = e + 127 of the block scale X = 2^e, read off the amax's exponent
// field, and s = 2^-e, scale_inv = 2^e. Floor: e = floor(log2 amax) - emax; RCeil: the
// least e with amax <= fp8_max * 2^e, one more exactly when the mantissa exceeds 1.75
// (fp8_max is 1.75 * 2^emax in both formats). E clamps at 0 (e = -127), which is also
// where a subnormal or zero amax lands; a finite amax gives E <= 247, so e needs no clamp
// above, s = 2^(127-E) is always normal and only scale_inv = 2^(E-127) needs the
// subnormal 2^-127. A quarter of the instructions of computing e from the float and then
// both powers, four times per MX tile and thread in the device kernels. (The exponent
// stays written out here: nvcc schedules a helper for it into other SASS.)
FP8SCOPE_HD BlockScale mx_block_scale(std::uint32_t amax_bits, Format f, MXRule rule) {
    BlockScale b{};
    if (amax_bits >= kInfBits) {
        b.s = b.scale_inv = float_of(kQuietNaNBits);
        b.e8m0 = kE8M0NaN;
        return b;
    }
    int E = static_cast<int>(amax_bits >> 23) - emax_of(f) +
            (rule == MXRule::RCeil && (amax_bits & 0x7FFFFFu) > 0x600000u ? 1 : 0);
    E = E < 0 ? 0 : E;
    b.s = float_of(static_cast<std::uint32_t>(254 - E) << 23);
    b.scale_inv = float_of(E > 0 ? static_cast<std::uint32_t>(E) << 23 : 0x00400000u);
    b.e8m0 = static_cast<std::uint8_t>(E);
    return b;
}

// The exponent e of X = 2^e for a block amax (finite, >= 0): mx_block_scale's; an amax
// of 0 (or anything not positive) gives -127, +Inf the exponent its field reads.
FP8SCOPE_HD int mx_exponent(float block_amax, Format f, MXRule rule) {
    if (!(block_amax > 0.0f)) return -127;
    const std::uint32_t a = bits_of(block_amax);
    return a < kInfBits ? mx_block_scale(a, f, rule).e8m0 - 127 : 255 - emax_of(f) - 127;
}

// Blockwise (mx false): compute_scale without eps, scale_inv = 1 / s, E8M0 0.
FP8SCOPE_HD BlockScale block_scale(std::uint32_t amax_bits, Format f, bool mx, MXRule rule, bool pow2_scale) {
    BlockScale b{};
    if (mx) {
        b = mx_block_scale(amax_bits, f, rule);
    } else {
        b.s = cast::compute_scale(float_of(amax_bits), f, 0.0f, pow2_scale);  // not ADL's fp8scope::compute_scale
        b.scale_inv = div_rn(1.0f, b.s);
        b.e8m0 = 0;
    }
    return b;
}

// Delayed scaling's next scale from the reference amax of the history: fp8_max / ref
// times 2^-margin, clamped to FLT_MAX; prev is kept on a reference of 0, Inf or NaN and
// when the scale underflows to 0. The product with 2^-margin is exact in float64, so its
// rounding to float32 is the only one (std::ldexp's result, subnormals included); |margin|
// past 400 changes nothing.
FP8SCOPE_HD float delayed_next_scale(float ref, float prev, Format f, int margin) {
    if (is_nan(ref) || is_inf(ref) || ref == 0.0f) return prev;
    const float q = div_rn(max_of(f), ref);
    const int m = margin < -400 ? -400 : (margin > 400 ? 400 : margin);
    const std::uint64_t p2_bits = static_cast<std::uint64_t>(1023 - m) << 52;  // 2^-m
#if defined(__CUDA_ARCH__)
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

// ---- FP4: E2M1 elements under NVFP4 and MXFP4 block scales (numerics.md) -------------------

// E2M1 magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6 by index 0-7; a code is the index with the
// sign in bit 3. No Inf or NaN.
constexpr float kE2M1Max = 6.0f;
constexpr std::uint8_t kE2M1Sign = 0x8;

// The E2M1 code of y: clamp to [-6, 6], then round to nearest, ties to even (the midpoints
// 0.25, 1.25, 2.5 and 5 go down, 0.75, 1.75 and 3.5 up). `clamped` gets 1 when |y| > 6
// (Inf included). -0 keeps its sign (code 8); NaN gives code 0 or 8 (callers keep NaN away).
FP8SCOPE_HD std::uint8_t e2m1_code(float y, std::uint32_t& clamped) {
    const std::uint32_t u = bits_of(y);
    const float a = float_of(u & ~kSignBit);
    clamped = a > kE2M1Max ? 1u : 0u;
    const std::uint32_t index = (a > 0.25f ? 1u : 0u) + (a >= 0.75f ? 1u : 0u) + (a > 1.25f ? 1u : 0u) +
                                (a >= 1.75f ? 1u : 0u) + (a > 2.5f ? 1u : 0u) + (a >= 3.5f ? 1u : 0u) +
                                (a > 5.0f ? 1u : 0u);
    return static_cast<std::uint8_t>(index | ((u >> 28) & kE2M1Sign));
}

FP8SCOPE_HD std::uint8_t e2m1_code(float y) {
    std::uint32_t unused;
    return e2m1_code(y, unused);
}

// The value of an E2M1 code (float32 bits: index 1 is 0.5, index i >= 2 is (1 + m/2) 2^(e-1)
// with e = i >> 1, m = i & 1).
FP8SCOPE_HD float e2m1_value(std::uint8_t code) {
    const std::uint32_t i = code & 7u;
    const std::uint32_t mag = i >= 2 ? (((i >> 1) + 126u) << 23) | ((i & 1u) << 22) : (i == 1 ? 0x3F000000u : 0u);
    return float_of(mag | (static_cast<std::uint32_t>(code & kE2M1Sign) << 28));
}

// How one FP4 block is cast: q = e2m1_code(x * enc), x' = (e2m1_value(q) * scale) * dec.
// NVFP4: scale = the E4M3 block scale s_b (code: its E4M3 code), dec = S_dec of the
// tensor. MXFP4: scale = 2^e (code: e + 127), dec = 1, enc = 2^-e. A block holding NaN or
// Inf has every factor NaN and the format's NaN scale code (E4M3 0x7F, E8M0 0xFF).
struct FP4BlockScale {
    float enc, scale, dec;
    std::uint8_t code;
};

// Quantize-dequantize of one element of a block; `clamped` as e2m1_code's.
FP8SCOPE_HD float fp4_qdq(float x, const FP4BlockScale& b, std::uint8_t& code, std::uint32_t& clamped) {
    code = e2m1_code(mul_rn(x, b.enc), clamped);
    return mul_rn(mul_rn(e2m1_value(code), b.scale), b.dec);
}

// NVFP4's tensor scale S_enc = min(448 * 6 / A, FLT_MAX) from the scaling amax A; 1 when
// A is 0 or Inf (the quotient 0), or not a number >= 0.
FP8SCOPE_HD float nvfp4_tensor_scale(float amax) {
    if (!(amax > 0.0f)) return 1.0f;
    float s = div_rn(448.0f * kE2M1Max, amax);
    if (s > FLT_MAX) s = FLT_MAX;
    return s == 0.0f ? 1.0f : s;
}

// NVFP4's block scale from the block amax (bits; at or past Inf: the block holds NaN or
// Inf) and the tensor's S_enc and S_dec = 1 / S_enc, in Transformer Engine's order:
// s_b = e4m3(min(amax_b * (S_enc * (1/6)), FLT_MAX)), enc = min(1 / (s_b * S_dec), FLT_MAX).
FP8SCOPE_HD FP4BlockScale nvfp4_block_scale(std::uint32_t amax_bits, float s_enc, float s_dec) {
    FP4BlockScale b{};
    if (amax_bits >= kInfBits) {
        b.enc = b.scale = b.dec = float_of(kQuietNaNBits);
        b.code = Traits<Format::E4M3>::kNaNCode;
        return b;
    }
    float v = mul_rn(float_of(amax_bits), mul_rn(s_enc, 1.0f / kE2M1Max));
    if (v > FLT_MAX) v = FLT_MAX;
    b.code = cast_code<Format::E4M3>(v);
    b.scale = round_sat<Format::E4M3>(v);
    float enc = div_rn(1.0f, mul_rn(b.scale, s_dec));
    if (enc > FLT_MAX) enc = FLT_MAX;
    b.enc = enc;
    b.dec = s_dec;
    return b;
}

// MXFP4's block scale 2^e from the block amax bits (at or past Inf: NaN, E8M0 0xFF).
// Floor: e = floor(log2 amax) - 2; RCeil: the least e with amax <= 6 * 2^e, one more than
// floor exactly when the mantissa exceeds 1.5 (6 = 1.5 * 2^2). Read off the exponent
// field as mx_block_scale does: E = e + 127 clamps at 0 (amax 0 or subnormal: e = -127)
// and stays <= 253 for a finite amax.
FP8SCOPE_HD FP4BlockScale mxfp4_block_scale(std::uint32_t amax_bits, MXRule rule) {
    FP4BlockScale b{};
    if (amax_bits >= kInfBits) {
        b.enc = b.scale = b.dec = float_of(kQuietNaNBits);
        b.code = kE8M0NaN;
        return b;
    }
    int E = static_cast<int>(amax_bits >> 23) - 2 + (rule == MXRule::RCeil && (amax_bits & 0x7FFFFFu) > 0x400000u ? 1 : 0);
    E = E < 0 ? 0 : E;
    b.enc = pow2(127 - E);
    b.scale = pow2(E - 127);
    b.dec = 1.0f;
    b.code = static_cast<std::uint8_t>(E);
    return b;
}

// ---- FP4 training: stochastic rounding and the random Hadamard transform ------------------

// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC 2011):
// four 32-bit words from a 128-bit counter and a 64-bit key, the generator of cuRAND and
// PyTorch. Integer arithmetic only, so host and device draw the same bits.
struct Philox4 {
    std::uint32_t v[4];
};

FP8SCOPE_HD Philox4 philox4x32_10(std::uint32_t c0, std::uint32_t c1, std::uint32_t c2, std::uint32_t c3,
                                  std::uint32_t k0, std::uint32_t k1) {
    constexpr std::uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u, kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
    for (int round = 0; round < 10; ++round) {
        const std::uint64_t p0 = static_cast<std::uint64_t>(kM0) * c0, p1 = static_cast<std::uint64_t>(kM1) * c2;
        const std::uint32_t hi0 = static_cast<std::uint32_t>(p0 >> 32), lo0 = static_cast<std::uint32_t>(p0);
        const std::uint32_t hi1 = static_cast<std::uint32_t>(p1 >> 32), lo1 = static_cast<std::uint32_t>(p1);
        c0 = hi1 ^ c1 ^ k0;
        c1 = lo1;
        c2 = hi0 ^ c3 ^ k1;
        c3 = lo0;
        k0 += kW0;
        k1 += kW1;
    }
    return Philox4{{c0, c1, c2, c3}};
}

// What keys the random bits of a stochastically rounded cast: the run's seed, the training
// step and the tensor (Fp8Linear: linear << 3 | operand << 1 | copy, copy 0 rowwise, 1
// columnwise). With the element's index in its copy (row-major) this is Philox's whole
// input, so a run is reproducible and every backend and thread count draws the same bits.
struct RoundingKey {
    std::uint64_t seed = 0, step = 0;
    std::uint32_t tensor = 0;
};

// The key a columnwise copy cast on its own draws with (not the rowwise copy's bits).
FP8SCOPE_HD RoundingKey columnwise_key(RoundingKey k) {
    k.tensor |= 1u;
    return k;
}

// The 32 random bits of element e: word e % 4 of Philox at counter (e / 4, tensor, step lo,
// step hi), key (seed lo, seed hi). Counters repeat past 2^34 elements in one copy.
FP8SCOPE_HD std::uint32_t rounding_bits(const RoundingKey& k, std::uint64_t e) {
    const Philox4 r = philox4x32_10(static_cast<std::uint32_t>(e >> 2), k.tensor, static_cast<std::uint32_t>(k.step),
                                    static_cast<std::uint32_t>(k.step >> 32), static_cast<std::uint32_t>(k.seed),
                                    static_cast<std::uint32_t>(k.seed >> 32));
    return r.v[e & 3u];
}

// The E2M1 code of y under stochastic rounding with random bits u: clamp to [-6, 6], then
// between the neighbours lo <= |y| < hi of the grid round up with probability
// (|y| - lo) / (hi - lo), taken as (u >> 8) * 2^-24 < that fraction (exact: the fraction
// is |y| - lo, exact by Sterbenz, times a power of two). E[decode] = y to within 2^-24 of
// a grid step. `clamped` and signs as e2m1_code's.
FP8SCOPE_HD std::uint8_t e2m1_code_sr(float y, std::uint32_t u, std::uint32_t& clamped) {
    const std::uint32_t ybits = bits_of(y);
    float a = float_of(ybits & ~kSignBit);
    clamped = a > kE2M1Max ? 1u : 0u;
    a = a > kE2M1Max ? kE2M1Max : a;
    const std::uint32_t lo = (a >= 0.5f ? 1u : 0u) + (a >= 1.0f ? 1u : 0u) + (a >= 1.5f ? 1u : 0u) +
                             (a >= 2.0f ? 1u : 0u) + (a >= 3.0f ? 1u : 0u) + (a >= 4.0f ? 1u : 0u) +
                             (a >= 6.0f ? 1u : 0u);
    // 2^24 / (hi - lo): grid steps 0.5 below 2, 1 below 4, 2 below 6.
    const float per_step = lo < 4 ? 33554432.0f : (lo < 6 ? 16777216.0f : 8388608.0f);
    const float frac = mul_rn(sub_rn(a, e2m1_value(static_cast<std::uint8_t>(lo))), per_step);
    const std::uint32_t up = lo < 7 && static_cast<float>(u >> 8) < frac ? 1u : 0u;
    return static_cast<std::uint8_t>((lo + up) | ((ybits >> 28) & kE2M1Sign));
}

// fp4_qdq with stochastic rounding by random bits u.
FP8SCOPE_HD float fp4_qdq_sr(float x, const FP4BlockScale& b, std::uint32_t u, std::uint8_t& code,
                             std::uint32_t& clamped) {
    code = e2m1_code_sr(mul_rn(x, b.enc), u, clamped);
    return mul_rn(mul_rn(e2m1_value(code), b.scale), b.dec);
}

// Transformer Engine's random Hadamard transform of 16 values along the contraction
// dimension: v <- v D H / 4, H the 16 x 16 Sylvester Hadamard matrix (H H^T = 16 I), D the
// diagonal of TE's fixed wgrad sign vector (bit i set: sign -1), so D H / 4 is orthogonal
// and a GEMM whose two operands both take it along K is unchanged. Float32 in a fixed
// order: signs (exact), four butterfly stages (a + b, a - b), then * 1/4 (exact but for
// subnormals), the same on every device.
constexpr std::uint32_t kRhtSignMask = 0xD7E8u;  // [1,1,1,-1,1,-1,-1,-1,-1,-1,-1,1,-1,1,-1,-1]
constexpr int kRhtSize = 16;

// The first `stages` of the 16-point Hadamard butterflies of rht16, in its order (stage
// h = 1, 2, 4, 8 pairs j and j + h).
FP8SCOPE_HD void hadamard16(float* v, int stages = 4) {
    for (int h = 1; h < (1 << stages); h *= 2)
        for (int i = 0; i < kRhtSize; i += 2 * h)
            for (int j = i; j < i + h; ++j) {
                const float a = v[j], b = v[j + h];
                v[j] = add_rn(a, b);
                v[j + h] = sub_rn(a, b);
            }
}

FP8SCOPE_HD void rht16(float* v) {
    for (int i = 0; i < kRhtSize; ++i)
        if ((kRhtSignMask >> i) & 1u) v[i] = float_of(bits_of(v[i]) ^ kSignBit);
    hadamard16(v);
    for (int i = 0; i < kRhtSize; ++i) v[i] = mul_rn(v[i], 0.25f);
}

// rht16's sign flips by negation, which a GPU's adds take for free.
FP8SCOPE_HD void negate_rht_signs(float* v) {
    for (int i = 0; i < kRhtSize; ++i)
        if ((kRhtSignMask >> i) & 1u) v[i] = -v[i];
}

// 4 rht16(v), the quarter left for a later multiply to take: rht16(v) = rht16_times4(v) *
// 1/4 bit for bit where v are BF16 values, since every sum of theirs is a multiple of
// 2^-133, whose quarter float32 holds exactly (subnormals included).
FP8SCOPE_HD void rht16_times4(float* v) {
    negate_rht_signs(v);
    hadamard16(v);
}

// max |rht16_times4(v)| (NaN ignored; v is overwritten) without the last stage's outputs:
// of a + b and a - b the larger magnitude is round(|a| + |b|), rounding being monotonic
// and symmetric (Inf and NaN included).
FP8SCOPE_HD float rht16_times4_abs_max(float* v) {
    negate_rht_signs(v);
    hadamard16(v, 3);
    float m = 0.0f;
    for (int j = 0; j < kRhtSize / 2; ++j) m = fmaxf(m, add_rn(fabsf(v[j]), fabsf(v[j + kRhtSize / 2])));
    return m;
}

}  // inline namespace FP8SCOPE_CAST_NS
}  // namespace fp8scope::cast
