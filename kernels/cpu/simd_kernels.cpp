// The leaf kernels of simd.h, compiled once per vector ISA: kernels/CMakeLists.txt builds
// this file with FP8SCOPE_ISA=generic (-march=x86-64, or the arm64 baseline), avx2
// (-march=x86-64-v3) and avx512 (-march=x86-64-v4). The cast kernels are written once on
// GCC vectors of the target's width; the analysis sums have an AVX-512 form and a
// portable one that keeps the same 16 float64 lanes. Every path does cast_rules.h's float32
// steps in the same order, so all give bitwise the same results; the generic one is the
// reference the others are tested against (tests/core/test_cpu_kernels.cpp).
//
// No container, no std::function, no algorithm: each compiled copy exports one symbol, its
// kernel table, and no out-of-line copy of an inline function compiled for a wider ISA can
// replace the baseline one at link time (the one-definition rule lets the linker take
// either); cast_rules.h's inline functions get this copy's own namespace.
// GCC 12 warns falsely about uninitialized values inside the AVX-512 intrinsics.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <cstdint>

#ifndef FP8SCOPE_ISA
#define FP8SCOPE_ISA generic
#endif
#define FP8SCOPE_CAST_NS FP8SCOPE_ISA  // cast_rules.h's functions get this file's own namespace
#include "fp8/cast_rules.h"
#include "cpu/simd.h"

#if defined(__AVX2__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace fp8scope::simd::FP8SCOPE_ISA {
namespace {

constexpr std::uint32_t kAbs = ~cast::kSignBit;
constexpr std::uint32_t kInf = cast::kInfBits;
constexpr float kQNaN = __builtin_nanf("");

inline std::uint32_t bits(float v) { return __builtin_bit_cast(std::uint32_t, v); }
inline std::uint32_t umax(std::uint32_t a, std::uint32_t b) { return a > b ? a : b; }
inline std::uint32_t umin(std::uint32_t a, std::uint32_t b) { return a < b ? a : b; }
inline double dmax(double a, double b) { return a > b ? a : b; }  // max_err: b is never NaN
inline bool is_nan(float v) { return v != v; }

#if defined(__AVX512F__)
inline __m512i abs_bits(__m512 v) { return _mm512_and_si512(_mm512_castps_si512(v), _mm512_set1_epi32(int(kAbs))); }
inline int popcount(unsigned m) { return __builtin_popcount(m); }
inline __mmask16 tail_mask(std::int64_t left) {
    return left >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << left) - 1u);
}
// 16 floats from p, the lanes past `left` NaN (which every sum skips).
inline __m512 load16(const float* p, std::int64_t left, __mmask16& valid) {
    valid = tail_mask(left);
    return _mm512_mask_loadu_ps(_mm512_set1_ps(kQNaN), valid, p);
}
inline __m512d lo_pd(__m512 v) { return _mm512_cvtps_pd(_mm512_castps512_ps256(v)); }
inline __m512d hi_pd(__m512 v) {
    return _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
}
#endif

// ---- one vector of lanes --------------------------------------------------------------------
// The cast kernels are written once, on GCC vectors as wide as this file's target: 16
// lanes (AVX-512), 8 (AVX2) or 4 (SSE2, NEON). Compares give -1/0 lanes, `c ? a : b`
// selects lane by lane. Integer lanes hold |x| bits or values rounded from them, below
// 2^31 wherever they are compared (a NaN's rounded bits may wrap, but every use of such a
// lane is masked), so signed compares order them; arithmetic is on unsigned lanes.
#if defined(__AVX512F__)
constexpr int kVecBytes = 64;
#elif defined(__AVX2__)
constexpr int kVecBytes = 32;
#else
constexpr int kVecBytes = 16;
#endif
constexpr int kN = kVecBytes / 4;
typedef float VF __attribute__((vector_size(kVecBytes)));
typedef std::int32_t VI __attribute__((vector_size(kVecBytes)));
typedef std::uint32_t VU __attribute__((vector_size(kVecBytes)));

inline VF load(const float* p) {
    VF v;
    __builtin_memcpy(&v, p, sizeof v);
    return v;
}
inline void store(void* p, VF v) { __builtin_memcpy(p, &v, sizeof v); }
inline VI sgn(VU v) { return __builtin_bit_cast(VI, v); }
inline VU abs_of(VF v) { return __builtin_bit_cast(VU, v) & kAbs; }
inline VU vmax(VU a, VU b) { return sgn(a) > sgn(b) ? a : b; }
inline VU finite_or_zero(VU a) { return sgn(a) > std::int32_t(kInf) ? VU{} : a; }  // NaN lanes: 0
inline std::uint32_t max_lane(VU v) {
    std::uint32_t m = 0;
    for (int j = 0; j < kN; ++j) m = umax(m, v[j]);
    return m;
}
inline std::int64_t sum_lanes(VI v) {
    std::int64_t s = 0;
    for (int j = 0; j < kN; ++j) s += v[j];
    return s;
}

// cast::round_sat on every lane, the same integer and float steps; `clamped` gets -1 in
// the lanes where a non-NaN y was clamped to max.
template <Format F>
inline VF round_sat(VF y, VI& clamped) {
    using T = cast::Traits<F>;
    const VU u = __builtin_bit_cast(VU, y), a = u & kAbs;
    const VU normal = (a + ((1u << (T::kDrop - 1)) - 1) + ((a >> T::kDrop) & 1u)) & ~((1u << T::kDrop) - 1u);
    const VF magic = VF{} + T::kSubMagic;
    const VU sub = __builtin_bit_cast(VU, (__builtin_bit_cast(VF, a) + magic) - magic);
    const VU r = sgn(a) < std::int32_t(T::kMinNormalBits) ? sub : normal;
    const VI nan = sgn(a) > std::int32_t(kInf);
    clamped = (sgn(r) > std::int32_t(T::kMaxBits)) & ~nan;
    VU mag = clamped ? VU{} + T::kMaxBits : r;
    mag = nan ? a : mag;  // NaN stays NaN
    return __builtin_bit_cast(VF, mag | (u & cast::kSignBit));
}

// ---- scaling amax ---------------------------------------------------------------------

std::uint32_t amax(const float* x, std::int64_t n, bool* nonfinite) {
    std::int64_t i = 0;
    VU vm{}, vraw{};
    for (; i + kN <= n; i += kN) {
        const VU a = abs_of(load(x + i));
        vraw = vmax(vraw, a);
        vm = vmax(vm, finite_or_zero(a));
    }
    std::uint32_t m = max_lane(vm), raw = max_lane(vraw);
    for (; i < n; ++i) {
        const std::uint32_t a = bits(x[i]) & kAbs;
        raw = umax(raw, a);
        m = a <= kInf ? umax(m, a) : m;
    }
    *nonfinite = raw >= kInf;
    return m;
}

// ---- the elementwise cast -----------------------------------------------------------------

inline std::uint32_t finite_bit(float x) { return (bits(x) & kAbs) < kInf ? 1u : 0u; }

// out = qdq(x) over [0, n); with `want_amax` also the scaling amax of x.
template <Format F, bool want_amax>
std::int64_t fake_body(const float* x, std::int64_t n, float s, float si, float* out, std::uint32_t* amax_out) {
    std::int64_t i = 0;
    VI clamped_finite{};  // -1 per lane and element counted
    VU vm{};
    for (; i + kN <= n; i += kN) {
        const VF v = load(x + i);
        VI clamped;
        store(out + i, round_sat<F>(v * s, clamped) * si);
        const VU a = abs_of(v);
        clamped_finite += clamped & (sgn(a) < std::int32_t(kInf));
        if (want_amax) vm = vmax(vm, finite_or_zero(a));
    }
    std::int64_t overflow = -sum_lanes(clamped_finite);
    std::uint32_t m = max_lane(vm);
    for (; i < n; ++i) {
        std::uint32_t o;
        const float v = cast::round_sat<F>(x[i] * s, o);
        overflow += o & finite_bit(x[i]);
        out[i] = v * si;
        if (want_amax) {
            const std::uint32_t a = bits(x[i]) & kAbs;
            m = a <= kInf ? umax(m, a) : m;
        }
    }
    if (want_amax) *amax_out = m;
    return overflow;
}

template <Format F>
std::int64_t fake(const float* x, std::int64_t n, float s, float si, float* out) {
    return fake_body<F, false>(x, n, s, si, out, nullptr);
}

template <Format F>
std::int64_t fake_amax(const float* x, std::int64_t n, float s, float si, float* out, std::uint32_t* m) {
    return fake_body<F, true>(x, n, s, si, out, m);
}

// ---- transpose ---------------------------------------------------------------------------

#if defined(__AVX2__) || defined(__AVX512F__)
// d (8 x 8, row stride ld) = transpose of s (8 x 8, row stride ls).
inline void transpose8(const float* s, std::int64_t ls, float* d, std::int64_t ld) {
    __m256 r[8], t[8], u[8];
    for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(s + i * ls);
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 8; i += 4) {
        u[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
        u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
        u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
        u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
    }
    for (int i = 0; i < 4; ++i) {
        _mm256_storeu_ps(d + i * ld, _mm256_permute2f128_ps(u[i], u[i + 4], 0x20));
        _mm256_storeu_ps(d + (i + 4) * ld, _mm256_permute2f128_ps(u[i], u[i + 4], 0x31));
    }
}
#endif

void transpose_block(float* dst, std::int64_t ld_dst, const float* src, std::int64_t ld_src, std::int64_t r0,
                     std::int64_t r1, std::int64_t c0, std::int64_t c1) {
    std::int64_t r = r0;
#if defined(__AVX2__) || defined(__AVX512F__)
    for (; r + 8 <= r1; r += 8) {
        std::int64_t c = c0;
        for (; c + 8 <= c1; c += 8) transpose8(src + r * ld_src + c, ld_src, dst + c * ld_dst + r, ld_dst);
        for (; c < c1; ++c)
            for (std::int64_t i = r; i < r + 8; ++i) dst[c * ld_dst + i] = src[i * ld_src + c];
    }
#endif
    for (; r < r1; ++r)
        for (std::int64_t c = c0; c < c1; ++c) dst[c * ld_dst + r] = src[r * ld_src + c];
}

// ---- cast-transpose tiles -----------------------------------------------------------------
// A tile is transposed once; the amaxes of the rows of x are then maxima down the columns
// of its transpose, as those of the columns of x are maxima down x's columns (no
// horizontal reductions), and each copy is cast row by row in its own layout.

// amax[j] / nonfinite[j] of column j of m (rows x cols, row stride ld): maxima down columns.
void column_amax(const float* m, std::int64_t ld, int rows, int cols, std::uint32_t* amax, std::uint8_t* nonfinite) {
    int c = 0;
    for (; c + kN <= cols; c += kN) {
        VU vm{}, vraw{};
        for (int r = 0; r < rows; ++r) {
            const VU a = abs_of(load(m + r * ld + c));
            vraw = vmax(vraw, a);
            vm = vmax(vm, finite_or_zero(a));
        }
        for (int j = 0; j < kN; ++j) amax[c + j] = vm[j], nonfinite[c + j] = vraw[j] >= kInf;
    }
    for (; c < cols; ++c) {
        std::uint32_t m_ = 0, raw = 0;
        for (int r = 0; r < rows; ++r) {
            const std::uint32_t a = bits(m[r * ld + c]) & kAbs;
            raw = umax(raw, a);
            if (a <= kInf) m_ = umax(m_, a);
        }
        amax[c] = m_;
        nonfinite[c] = raw >= kInf;
    }
}

void tile_amax(const Tile& t, std::uint32_t* row_amax, std::uint8_t* row_nf, std::uint32_t* col_amax,
               std::uint8_t* col_nf) {
    transpose_block(t.xt, t.nr, t.x, t.ld, 0, t.nr, 0, t.nc);
    column_amax(t.x, t.ld, t.nr, t.nc, col_amax, col_nf);
    column_amax(t.xt, t.nr, t.nc, t.nr, row_amax, row_nf);
}

// The rows of m (rows x n, stride ld) cast with one scale per row into out (stride ld_out);
// rows whose scale is NaN are NaN. Returns the clamped finite inputs.
template <Format F>
std::int64_t cast_rows(const float* m, std::int64_t ld, int rows, int n, const float* s, const float* si, float* out,
                       std::int64_t ld_out) {
    std::int64_t overflow = 0;
    for (int r = 0; r < rows; ++r) {
        float* o = out + r * ld_out;
        if (is_nan(s[r])) {
            for (int i = 0; i < n; ++i) o[i] = kQNaN;
            continue;
        }
        overflow += fake_body<F, false>(m + r * ld, n, s[r], si[r], o, nullptr);
    }
    return overflow;
}

template <Format F>
std::int64_t tile_cast(const Tile& t, const TileCast& k) {
    cast_rows<F>(t.xt, t.nr, t.nc, t.nr, k.s_col, k.si_col, k.columnwise, k.ld_col);
    return cast_rows<F>(t.x, t.ld, t.nr, t.nc, k.s_row, k.si_row, k.rowwise, k.ld_row);
}

// ---- FP4: E2M1 fake quantization, Philox bits, the transposed RHT ---------------------------
// The E2M1 value of a lane is computed directly (the code is never needed): for |y| >= 1
// the float rounded to one mantissa bit, ties to even, at most 6; below 1 the grid 0, 0.5,
// 1 (0.25 down, 0.75 up). That is cast::e2m1_value(cast::e2m1_code(y)) for every float
// (NaN: +-0); the stochastic form takes the neighbours lo <= |y| < hi and the comparison of
// cast::e2m1_code_sr in the same float steps.

constexpr std::int32_t kHalfBits = 0x3F000000, kOneBits = 0x3F800000, kTwoBits = 0x40000000;
constexpr std::int32_t kFourBits = 0x40800000, kSixBits = 0x40C00000;
constexpr std::uint32_t kE2M1MantMask = 0xFFC00000u;  // sign, exponent, one mantissa bit

inline VF e2m1_rn(VF y, VI& clamped) {
    const VU u = __builtin_bit_cast(VU, y), a = u & kAbs;
    const VI sa = sgn(a);
    clamped = (sa > kSixBits) & (sa <= std::int32_t(kInf));
    const VU m = sa < kSixBits ? a : VU{} + std::uint32_t(kSixBits);
    const VU big = (m + 0x1FFFFFu + ((m >> 22) & 1u)) & kE2M1MantMask;
    const VU small = sa > 0x3E800000 ? (sa >= 0x3F400000 ? VU{} + std::uint32_t(kOneBits) : VU{} + std::uint32_t(kHalfBits)) : VU{};
    VU mag = sa >= kOneBits ? big : small;
    mag = sa > std::int32_t(kInf) ? VU{} : mag;
    return __builtin_bit_cast(VF, mag | (u & cast::kSignBit));
}

inline VF e2m1_sr(VF y, VU rnd, VI& clamped) {
    const VU u = __builtin_bit_cast(VU, y), a0 = u & kAbs;
    const VI s0 = sgn(a0);
    clamped = (s0 > kSixBits) & (s0 <= std::int32_t(kInf));
    const VU a = clamped ? VU{} + std::uint32_t(kSixBits) : a0;
    const VI sa = sgn(a);
    const VU lo = sa >= kOneBits ? (a & kE2M1MantMask) : (sa >= kHalfBits ? VU{} + std::uint32_t(kHalfBits) : VU{});
    const VU hi = sa >= kOneBits ? lo + 0x400000u : (sa >= kHalfBits ? VU{} + std::uint32_t(kOneBits) : VU{} + std::uint32_t(kHalfBits));
    const VF per_step = sa < kTwoBits ? VF{} + 33554432.0f : (sa < kFourBits ? VF{} + 16777216.0f : VF{} + 8388608.0f);
    const VF frac = (__builtin_bit_cast(VF, a) - __builtin_bit_cast(VF, lo)) * per_step;
    const VF draw = __builtin_convertvector(sgn(rnd >> 8), VF);
    VU mag = draw < frac ? hi : lo;
    mag = sa > std::int32_t(kInf) ? VU{} : mag;
    return __builtin_bit_cast(VF, mag | (u & cast::kSignBit));
}

template <bool kSr>
std::int64_t fp4_fake_row(const float* x, std::int64_t n, int block, const float* enc, const float* scale, float dec,
                          const std::uint32_t* rnd, float* out) {
    VI clamped_sum{};
    std::int64_t overflow = 0;
    for (std::int64_t c0 = 0, b = 0; c0 < n; c0 += block, ++b) {
        const std::int64_t len = n - c0 < block ? n - c0 : block;
        if (is_nan(scale[b])) {
            for (std::int64_t i = 0; i < len; ++i) out[c0 + i] = scale[b];
            continue;
        }
        const VF e = VF{} + enc[b], s = VF{} + scale[b], d = VF{} + dec;
        std::int64_t i = 0;
        for (; i + kN <= len; i += kN) {
            const VF y = load(x + c0 + i) * e;
            VI clamped;
            VF q;
            if constexpr (kSr) {
                VU r;
                __builtin_memcpy(&r, rnd + c0 + i, sizeof r);
                q = e2m1_sr(y, r, clamped);
            } else {
                q = e2m1_rn(y, clamped);
            }
            store(out + c0 + i, (q * s) * d);
            clamped_sum += clamped;
        }
        const cast::FP4BlockScale bs{enc[b], scale[b], dec, 0};
        for (; i < len; ++i) {
            std::uint8_t code;
            std::uint32_t clamped;
            out[c0 + i] = kSr ? cast::fp4_qdq_sr(x[c0 + i], bs, rnd[c0 + i], code, clamped)
                              : cast::fp4_qdq(x[c0 + i], bs, code, clamped);
            overflow += clamped;
        }
    }
    return overflow - sum_lanes(clamped_sum);
}

std::int64_t fp4_fake_row_any(const float* x, std::int64_t n, int block, const float* enc, const float* scale,
                              float dec, const std::uint32_t* rnd, float* out) {
    return rnd ? fp4_fake_row<true>(x, n, block, enc, scale, dec, rnd, out)
               : fp4_fake_row<false>(x, n, block, enc, scale, dec, rnd, out);
}

// The largest lane, by halving (a block of 16 is one AVX-512 vector: no scalar loop).
inline std::uint32_t max_lane_tree(VU v) {
#if defined(__AVX512F__)
    v = vmax(v, __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7));
    v = vmax(v, __builtin_shufflevector(v, v, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3));
    v = vmax(v, __builtin_shufflevector(v, v, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1));
    v = vmax(v, __builtin_shufflevector(v, v, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0));
#elif defined(__AVX2__)
    v = vmax(v, __builtin_shufflevector(v, v, 4, 5, 6, 7, 0, 1, 2, 3));
    v = vmax(v, __builtin_shufflevector(v, v, 2, 3, 0, 1, 2, 3, 0, 1));
    v = vmax(v, __builtin_shufflevector(v, v, 1, 0, 1, 0, 1, 0, 1, 0));
#else
    v = vmax(v, __builtin_shufflevector(v, v, 2, 3, 0, 1));
    v = vmax(v, __builtin_shufflevector(v, v, 1, 0, 1, 0));
#endif
    return v[0];
}

void block_amax(const float* x, std::int64_t n, int block, std::uint32_t* amax) {
    for (std::int64_t c0 = 0, b = 0; c0 < n; c0 += block, ++b) {
        const std::int64_t len = n - c0 < block ? n - c0 : block;
        std::int64_t i = 0;
        VU vm{};
        for (; i + kN <= len; i += kN) vm = vmax(vm, abs_of(load(x + c0 + i)));
        std::uint32_t m = umax(amax[b], max_lane_tree(vm));
        for (; i < len; ++i) m = umax(m, bits(x[c0 + i]) & kAbs);
        amax[b] = m;
    }
}

// Philox4x32-10 on kN counters at once: cast::philox4x32_10's rounds, lane by lane.
typedef std::uint64_t VU64 __attribute__((vector_size(kVecBytes * 2)));
inline void mul_wide(VU a, std::uint32_t m, VU& hi, VU& lo) {
    const VU64 p = __builtin_convertvector(a, VU64) * std::uint64_t(m);
    hi = __builtin_convertvector(p >> 32, VU);
    lo = a * m;
}

std::uint32_t rounding_bit(const PhiloxKey& k, std::uint64_t e) {
    return cast::philox4x32_10(std::uint32_t(e >> 2), k.tensor, k.step_lo, k.step_hi, k.seed_lo, k.seed_hi).v[e & 3u];
}

void rounding_bits(const PhiloxKey& k, std::uint64_t e0, std::int64_t n, std::uint32_t* out) {
    const std::uint64_t e1 = e0 + std::uint64_t(n);
    std::uint64_t e = e0;
    for (; e < e1 && (e & 3u); ++e) out[e - e0] = rounding_bit(k, e);
    VU lane;
    for (int j = 0; j < kN; ++j) lane[j] = std::uint32_t(j);
    for (; e + 4 * kN <= e1; e += 4 * kN) {
        VU c0 = std::uint32_t(e >> 2) + lane, c1 = VU{} + k.tensor, c2 = VU{} + k.step_lo, c3 = VU{} + k.step_hi;
        std::uint32_t k0 = k.seed_lo, k1 = k.seed_hi;
        for (int round = 0; round < 10; ++round) {
            VU hi0, lo0, hi1, lo1;
            mul_wide(c0, 0xD2511F53u, hi0, lo0);
            mul_wide(c2, 0xCD9E8D57u, hi1, lo1);
            c0 = hi1 ^ c1 ^ k0;
            c1 = lo1;
            c2 = hi0 ^ c3 ^ k1;
            c3 = lo0;
            k0 += 0x9E3779B9u;
            k1 += 0xBB67AE85u;
        }
        std::uint32_t* o = out + (e - e0);
        for (int j = 0; j < kN; ++j) o[4 * j] = c0[j], o[4 * j + 1] = c1[j], o[4 * j + 2] = c2[j], o[4 * j + 3] = c3[j];
    }
    for (; e < e1; ++e) out[e - e0] = rounding_bit(k, e);
}

// cast::rht16 on 16 rows of kN lanes: the same signs, butterflies and * 1/4, lane by lane.
inline void rht16_lanes(VF* v) {
    for (int i = 0; i < cast::kRhtSize; ++i)
        if ((cast::kRhtSignMask >> i) & 1u) v[i] = __builtin_bit_cast(VF, __builtin_bit_cast(VU, v[i]) ^ cast::kSignBit);
    for (int h = 1; h < cast::kRhtSize; h *= 2)
        for (int i = 0; i < cast::kRhtSize; i += 2 * h)
            for (int j = i; j < i + h; ++j) {
                const VF a = v[j], b = v[j + h];
                v[j] = a + b;
                v[j + h] = a - b;
            }
    for (int i = 0; i < cast::kRhtSize; ++i) v[i] = v[i] * 0.25f;
}

inline VU scaling_max(VU m, VU a) { return vmax(m, sgn(a) > std::int32_t(kInf) ? VU{} : a); }

std::uint32_t rht_transpose(float* t, const float* x, std::int64_t rows, std::int64_t cols, std::int64_t r0,
                            std::int64_t r1, bool rht) {
    std::uint32_t m = 0;
    if (!rht || r1 - r0 != cast::kRhtSize) {
        transpose_block(t, rows, x, cols, r0, r1, 0, cols);
        for (std::int64_t r = r0; r < r1; ++r) {
            bool nf;
            m = umax(m, amax(x + r * cols, cols, &nf));
        }
        return m;
    }
    // The 16 rows are one transform block down every column: transform kN columns at a
    // time in registers, then transpose them out.
    VU vm{};
    alignas(64) float tile[cast::kRhtSize * kN];
    const float* s = x + r0 * cols;
    std::int64_t c = 0;
    for (; c + kN <= cols; c += kN) {
        VF v[cast::kRhtSize];
        for (int i = 0; i < cast::kRhtSize; ++i) v[i] = load(s + i * cols + c);
        rht16_lanes(v);
        for (int i = 0; i < cast::kRhtSize; ++i) {
            vm = scaling_max(vm, abs_of(v[i]));
            store(tile + i * kN, v[i]);
        }
        float* d = t + c * rows + r0;
#if defined(__AVX2__) || defined(__AVX512F__)
        for (int i = 0; i < cast::kRhtSize; i += 8)
            for (int j = 0; j < kN; j += 8) transpose8(tile + i * kN + j, kN, d + j * rows + i, rows);
#else
        for (int j = 0; j < kN; ++j)
            for (int i = 0; i < cast::kRhtSize; ++i) d[j * rows + i] = tile[i * kN + j];
#endif
    }
    m = max_lane(vm);
    for (; c < cols; ++c) {
        float v[cast::kRhtSize];
        for (int i = 0; i < cast::kRhtSize; ++i) v[i] = s[i * cols + c];
        cast::rht16(v);
        for (int i = 0; i < cast::kRhtSize; ++i) {
            const std::uint32_t a = bits(v[i]) & kAbs;
            m = a <= kInf ? umax(m, a) : m;
            t[c * rows + r0 + i] = v[i];
        }
    }
    return m;
}

// ---- AdamW --------------------------------------------------------------------------------
// Backend::adamw's arithmetic element by element, in the same order (this file is built
// with -fno-math-errno, so the IEEE square root vectorizes; it sets no errno, nothing else
// changes).
void adamw(float* params, const float* g, float* m, float* v, bool decay, std::int64_t n, const AdamWArgs& a) {
    const float b1 = a.beta1, b2 = a.beta2, eps = a.eps, wd = a.weight_decay, lr = a.lr;
    const float c1 = a.bias_correction1, c2 = a.bias_correction2, gs = a.grad_scale;
    for (std::int64_t i = 0; i < n; ++i) {
        const float gi = g[i] * gs;
        const float mi = b1 * m[i] + (1.0f - b1) * gi;
        const float vi = b2 * v[i] + (1.0f - b2) * gi * gi;
        float update = (mi / c1) / (__builtin_sqrtf(vi / c2) + eps);
        if (decay) update = update + wd * params[i];
        m[i] = mi;
        v[i] = vi;
        params[i] -= lr * update;
    }
}

// ---- the analysis's sums ------------------------------------------------------------------
// Lane j of every sum takes the elements j, j + 16, ... of a call's range, starting from
// the lane's value on entry; elements past the end count as NaN (skipped).

#if !defined(__AVX512F__)
// body(v, a, fin, j) for every element v of x[0, n) in groups of 16 (lane j, |v| bits a,
// fin: v is finite), a short last group padded with NaNs.
template <class Body>
inline void each_lane(const float* x, std::int64_t n, Body&& body) {
    alignas(64) float pad[kLanes];
    for (std::int64_t i = 0; i < n; i += kLanes) {
        const float* v = x + i;
        if (n - i < kLanes) {
            for (int j = 0; j < kLanes; ++j) pad[j] = i + j < n ? x[i + j] : kQNaN;
            v = pad;
        }
        for (int j = 0; j < kLanes; ++j) {
            const std::uint32_t a = bits(v[j]) & kAbs;
            body(v[j], a, a < kInf, j);
        }
    }
}
#endif

void moment_sums(const float* x, std::int64_t n, MomentSums& p) {
#if defined(__AVX512F__)
    __m512d sum0 = _mm512_loadu_pd(p.sum), sum1 = _mm512_loadu_pd(p.sum + 8);
    __m512d sq0 = _mm512_loadu_pd(p.sum2), sq1 = _mm512_loadu_pd(p.sum2 + 8);
    __m512i amax = _mm512_setzero_si512(), amax_fin = _mm512_setzero_si512();
    const __m512i inf = _mm512_set1_epi32(int(kInf));
    std::int64_t nan = 0, infs = 0;
    for (std::int64_t i = 0; i < n; i += 16) {
        __mmask16 valid;
        const __m512 v = load16(x + i, n - i, valid);
        const __m512i a = abs_bits(v);
        const __mmask16 fin = _mm512_cmplt_epu32_mask(a, inf);
        const __mmask16 is_nan = _mm512_cmpgt_epu32_mask(a, inf);
        nan += popcount(is_nan & valid);
        infs += popcount(_mm512_cmpeq_epi32_mask(a, inf));
        amax = _mm512_max_epu32(amax, _mm512_maskz_mov_epi32(__mmask16(~is_nan), a));
        amax_fin = _mm512_max_epu32(amax_fin, _mm512_maskz_mov_epi32(fin, a));
        const __m512 vf = _mm512_maskz_mov_ps(fin, v);
        const __m512d d0 = lo_pd(vf), d1 = hi_pd(vf);
        sum0 = _mm512_add_pd(sum0, d0);
        sum1 = _mm512_add_pd(sum1, d1);
        sq0 = _mm512_add_pd(sq0, _mm512_mul_pd(d0, d0));
        sq1 = _mm512_add_pd(sq1, _mm512_mul_pd(d1, d1));
    }
    _mm512_storeu_pd(p.sum, sum0);
    _mm512_storeu_pd(p.sum + 8, sum1);
    _mm512_storeu_pd(p.sum2, sq0);
    _mm512_storeu_pd(p.sum2 + 8, sq1);
    p.amax = umax(p.amax, std::uint32_t(_mm512_reduce_max_epu32(amax)));
    p.amax_finite = umax(p.amax_finite, std::uint32_t(_mm512_reduce_max_epu32(amax_fin)));
    p.nan += nan;
    p.inf += infs;
#else
    double sum[kLanes], sum2[kLanes];
    std::uint32_t amax[kLanes] = {}, amax_fin[kLanes] = {}, nan[kLanes] = {}, inf[kLanes] = {};
    for (int j = 0; j < kLanes; ++j) sum[j] = p.sum[j], sum2[j] = p.sum2[j];
    each_lane(x, n, [&](float v, std::uint32_t a, bool fin, int j) {
        const double d = fin ? double(v) : 0.0;
        sum[j] += d;
        sum2[j] += d * d;
        amax[j] = umax(amax[j], a > kInf ? 0u : a);
        amax_fin[j] = umax(amax_fin[j], fin ? a : 0u);
        nan[j] += a > kInf;
        inf[j] += a == kInf;
    });
    const std::int64_t padded = (kLanes - n % kLanes) % kLanes;
    for (int j = 0; j < kLanes; ++j) {
        p.sum[j] = sum[j];
        p.sum2[j] = sum2[j];
        p.amax = umax(p.amax, amax[j]);
        p.amax_finite = umax(p.amax_finite, amax_fin[j]);
        p.nan += nan[j];
        p.inf += inf[j];
    }
    p.nan -= padded;
#endif
}

std::uint32_t central_sums(const float* x, std::int64_t n, double mean, double threshold, CentralSums& acc) {
#if defined(__AVX512F__)
    __m512d m2_0 = _mm512_loadu_pd(acc.m2), m2_1 = _mm512_loadu_pd(acc.m2 + 8);
    __m512d m4_0 = _mm512_loadu_pd(acc.m4), m4_1 = _mm512_loadu_pd(acc.m4 + 8);
    const __m512d vmean = _mm512_set1_pd(mean), vthr = _mm512_set1_pd(threshold);
    const __m512i inf = _mm512_set1_epi32(int(kInf));
    __m512i min_nz = inf, seg_max = _mm512_setzero_si512();
    std::int64_t beyond = 0;
    for (std::int64_t i = 0; i < n; i += 16) {
        __mmask16 valid;
        const __m512 v = load16(x + i, n - i, valid);
        const __m512i a = abs_bits(v);
        const __mmask16 fin = _mm512_cmplt_epu32_mask(a, inf);
        const __mmask16 nz = fin & _mm512_test_epi32_mask(a, a);
        min_nz = _mm512_mask_min_epu32(min_nz, nz, min_nz, a);
        seg_max = _mm512_mask_max_epu32(seg_max, fin, seg_max, a);
        const __m512d x0 = lo_pd(v), x1 = hi_pd(v);
        const __mmask8 f0 = __mmask8(fin), f1 = __mmask8(fin >> 8);
        const __m512d d0 = _mm512_maskz_sub_pd(f0, x0, vmean), d1 = _mm512_maskz_sub_pd(f1, x1, vmean);
        const __m512d q0 = _mm512_mul_pd(d0, d0), q1 = _mm512_mul_pd(d1, d1);
        m2_0 = _mm512_add_pd(m2_0, q0);
        m2_1 = _mm512_add_pd(m2_1, q1);
        m4_0 = _mm512_add_pd(m4_0, _mm512_mul_pd(q0, q0));
        m4_1 = _mm512_add_pd(m4_1, _mm512_mul_pd(q1, q1));
        beyond += popcount(unsigned(_mm512_mask_cmp_pd_mask(f0, _mm512_abs_pd(x0), vthr, _CMP_GT_OQ)));
        beyond += popcount(unsigned(_mm512_mask_cmp_pd_mask(f1, _mm512_abs_pd(x1), vthr, _CMP_GT_OQ)));
    }
    _mm512_storeu_pd(acc.m2, m2_0);
    _mm512_storeu_pd(acc.m2 + 8, m2_1);
    _mm512_storeu_pd(acc.m4, m4_0);
    _mm512_storeu_pd(acc.m4 + 8, m4_1);
    acc.beyond += beyond;
    acc.min_nz = umin(acc.min_nz, std::uint32_t(_mm512_reduce_min_epu32(min_nz)));
    return std::uint32_t(_mm512_reduce_max_epu32(seg_max));
#else
    double m2[kLanes], m4[kLanes];
    std::uint32_t beyond[kLanes] = {}, min_nz[kLanes], seg_max[kLanes] = {};
    for (int j = 0; j < kLanes; ++j) m2[j] = acc.m2[j], m4[j] = acc.m4[j], min_nz[j] = kInf;
    each_lane(x, n, [&](float v, std::uint32_t a, bool fin, int j) {
        const double xd = fin ? double(v) : 0.0;
        const double d = fin ? xd - mean : 0.0;
        const double d2 = d * d;
        m2[j] += d2;
        m4[j] += d2 * d2;
        beyond[j] += fin && (xd < 0 ? -xd : xd) > threshold;
        min_nz[j] = umin(min_nz[j], (a == 0 || !fin) ? kInf : a);
        seg_max[j] = umax(seg_max[j], fin ? a : 0u);
    });
    std::uint32_t smax = 0;
    for (int j = 0; j < kLanes; ++j) {
        acc.m2[j] = m2[j];
        acc.m4[j] = m4[j];
        acc.beyond += beyond[j];
        acc.min_nz = umin(acc.min_nz, min_nz[j]);
        smax = umax(smax, seg_max[j]);
    }
    return smax;
#endif
}

// x' = round_sat(x * s) * si; sums over finite x with finite x'.
template <Format F>
void error_sums(const float* x, std::int64_t n, float s, float si, ErrorSums& acc) {
#if defined(__AVX512F__)
    __m512d sxx0 = _mm512_loadu_pd(acc.sxx), sxx1 = _mm512_loadu_pd(acc.sxx + 8);
    __m512d sdd0 = _mm512_loadu_pd(acc.sdd), sdd1 = _mm512_loadu_pd(acc.sdd + 8);
    __m512d sqq0 = _mm512_loadu_pd(acc.sqq), sqq1 = _mm512_loadu_pd(acc.sqq + 8);
    __m512d sxq0 = _mm512_loadu_pd(acc.sxq), sxq1 = _mm512_loadu_pd(acc.sxq + 8);
    __m512d me0 = _mm512_loadu_pd(acc.max_err), me1 = _mm512_loadu_pd(acc.max_err + 8);
    const __m512 vs = _mm512_set1_ps(s), vsi = _mm512_set1_ps(si);
    const __m512i inf = _mm512_set1_epi32(int(kInf));
    std::int64_t under = 0, over = 0, nonfinite = 0;
    for (std::int64_t i = 0; i < n; i += 16) {
        __mmask16 valid;
        const __m512 v = load16(x + i, n - i, valid);
        const __m512i a = abs_bits(v);
        const __mmask16 fin = _mm512_cmplt_epu32_mask(a, inf);
        VI clamped_lanes;
        const __m512 r = round_sat<F>(_mm512_mul_ps(v, vs), clamped_lanes);
        const __mmask16 clamped = _mm512_movepi32_mask(__m512i(clamped_lanes));
        const __m512 q = _mm512_mul_ps(r, vsi);
        const __mmask16 q_fin = _mm512_cmplt_epu32_mask(abs_bits(q), inf);
        const __mmask16 use = fin & q_fin;
        under += popcount(fin & _mm512_test_epi32_mask(a, a) & ~_mm512_test_epi32_mask(abs_bits(r), abs_bits(r)));
        over += popcount(fin & clamped);
        nonfinite += popcount(fin & ~q_fin);
        const __mmask8 u0 = __mmask8(use), u1 = __mmask8(use >> 8);
        const __m512d x0 = _mm512_maskz_mov_pd(u0, lo_pd(v)), x1 = _mm512_maskz_mov_pd(u1, hi_pd(v));
        const __m512d q0 = _mm512_maskz_mov_pd(u0, lo_pd(q)), q1 = _mm512_maskz_mov_pd(u1, hi_pd(q));
        const __m512d d0 = _mm512_sub_pd(q0, x0), d1 = _mm512_sub_pd(q1, x1);
        sxx0 = _mm512_add_pd(sxx0, _mm512_mul_pd(x0, x0));
        sxx1 = _mm512_add_pd(sxx1, _mm512_mul_pd(x1, x1));
        sdd0 = _mm512_add_pd(sdd0, _mm512_mul_pd(d0, d0));
        sdd1 = _mm512_add_pd(sdd1, _mm512_mul_pd(d1, d1));
        sqq0 = _mm512_add_pd(sqq0, _mm512_mul_pd(q0, q0));
        sqq1 = _mm512_add_pd(sqq1, _mm512_mul_pd(q1, q1));
        sxq0 = _mm512_add_pd(sxq0, _mm512_mul_pd(x0, q0));
        sxq1 = _mm512_add_pd(sxq1, _mm512_mul_pd(x1, q1));
        me0 = _mm512_max_pd(me0, _mm512_abs_pd(d0));
        me1 = _mm512_max_pd(me1, _mm512_abs_pd(d1));
    }
    _mm512_storeu_pd(acc.sxx, sxx0);
    _mm512_storeu_pd(acc.sxx + 8, sxx1);
    _mm512_storeu_pd(acc.sdd, sdd0);
    _mm512_storeu_pd(acc.sdd + 8, sdd1);
    _mm512_storeu_pd(acc.sqq, sqq0);
    _mm512_storeu_pd(acc.sqq + 8, sqq1);
    _mm512_storeu_pd(acc.sxq, sxq0);
    _mm512_storeu_pd(acc.sxq + 8, sxq1);
    _mm512_storeu_pd(acc.max_err, me0);
    _mm512_storeu_pd(acc.max_err + 8, me1);
    acc.underflow += under;
    acc.overflow += over;
    acc.nonfinite_out += nonfinite;
#else
    double sxx[kLanes], sdd[kLanes], sqq[kLanes], sxq[kLanes], max_err[kLanes];
    for (int j = 0; j < kLanes; ++j) {
        sxx[j] = acc.sxx[j], sdd[j] = acc.sdd[j], sqq[j] = acc.sqq[j], sxq[j] = acc.sxq[j];
        max_err[j] = acc.max_err[j];
    }
    std::uint32_t under[kLanes] = {}, over[kLanes] = {}, nonfinite[kLanes] = {};
    each_lane(x, n, [&](float v, std::uint32_t a, bool fin, int j) {
        std::uint32_t o;
        const float r = cast::round_sat<F>(v * s, o);
        const float q = r * si;
        const bool q_fin = (bits(q) & kAbs) < kInf;
        const bool use = fin && q_fin;
        const double xd = use ? double(v) : 0.0;
        const double qd = use ? double(q) : 0.0;
        const double d = qd - xd;
        sxx[j] += xd * xd;
        sdd[j] += d * d;
        sqq[j] += qd * qd;
        sxq[j] += xd * qd;
        max_err[j] = dmax(max_err[j], d < 0 ? -d : d);
        under[j] += fin && a != 0 && r == 0.0f;
        over[j] += fin ? o : 0u;
        nonfinite[j] += fin && !q_fin;
    });
    for (int j = 0; j < kLanes; ++j) {
        acc.sxx[j] = sxx[j], acc.sdd[j] = sdd[j], acc.sqq[j] = sqq[j], acc.sxq[j] = sxq[j];
        acc.max_err[j] = max_err[j];
        acc.underflow += under[j];
        acc.overflow += over[j];
        acc.nonfinite_out += nonfinite[j];
    }
#endif
}

#define FP8SCOPE_STR2(x) #x
#define FP8SCOPE_STR(x) FP8SCOPE_STR2(x)

}  // namespace

extern const Kernels table;
const Kernels table = {
    FP8SCOPE_STR(FP8SCOPE_ISA),
    &amax,
    {&fake<Format::E4M3>, &fake<Format::E5M2>},
    {&fake_amax<Format::E4M3>, &fake_amax<Format::E5M2>},
    &tile_amax,
    {&tile_cast<Format::E4M3>, &tile_cast<Format::E5M2>},
    &transpose_block,
    &fp4_fake_row_any,
    &block_amax,
    &rounding_bits,
    &rht_transpose,
    &adamw,
    &moment_sums,
    &central_sums,
    {&error_sums<Format::E4M3>, &error_sums<Format::E5M2>},
};

}  // namespace fp8scope::simd::FP8SCOPE_ISA
