// The FP4 quantizers (NVFP4 1x16 and 16x16, MXFP4 floor and RCEIL): the E2M1 cast against
// a table written out by hand and a nearest-value search, blocks and scales worked out by
// hand (ties, zero blocks, denormal amaxes, the FLT_MAX clamps, edge blocks, NaN/Inf
// blocks), and analyze()'s error figures against a float64 reference written from
// numerics.md with plain float32 scale steps and format.cpp's encode() for E4M3.
#include <gtest/gtest.h>

#include <bit>
#include <cfloat>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "cpu/analysis.h"
#include "cpu/fp4.h"
#include "fp8/cast_rules.h"
#include "fp8/format.h"
#include "reference/reference.h"

namespace fp8scope {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
const float kMag[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};

// E4M3 codes of the block scales used below.
constexpr std::uint8_t kE4M3Half = 0x30, kE4M3One = 0x38, kE4M3Two = 0x40, kE4M3Max = 0x7E, kE4M3NaN = 0x7F;

// ---- E2M1 ------------------------------------------------------------------------------

struct CastCase {
    float y;
    std::uint8_t code;
    bool clamped;
};

// Every magnitude, every midpoint (ties to the even index), past 6, and the floats
// beside the midpoints.
const CastCase kCastTable[] = {
    {0.0f, 0, false},   {0.5f, 1, false},  {1.0f, 2, false},  {1.5f, 3, false}, {2.0f, 4, false},
    {3.0f, 5, false},   {4.0f, 6, false},  {6.0f, 7, false},  {0.25f, 0, false}, {0.75f, 2, false},
    {1.25f, 2, false},  {1.75f, 4, false}, {2.5f, 4, false},  {3.5f, 6, false}, {5.0f, 6, false},
    {6.5f, 7, true},    {7.0f, 7, true},   {1e30f, 7, true},  {FLT_MAX, 7, true}, {kInf, 7, true},
    {1e-45f, 0, false}, {1e-40f, 0, false},
    {std::nextafter(0.25f, 1.0f), 1, false}, {std::nextafter(0.75f, 0.0f), 1, false},
    {std::nextafter(1.25f, 2.0f), 3, false}, {std::nextafter(1.75f, 0.0f), 3, false},
    {std::nextafter(2.5f, 3.0f), 5, false},  {std::nextafter(3.5f, 0.0f), 5, false},
    {std::nextafter(5.0f, 6.0f), 7, false},  {std::nextafter(6.0f, 7.0f), 7, true},
};

TEST(E2M1, CastMatchesTheHandTableAndItsNegativeMirror) {
    for (const CastCase& c : kCastTable) {
        for (float sign : {1.0f, -1.0f}) {
            std::uint32_t clamped = 9;
            const std::uint8_t code = cast::e2m1_code(sign * c.y, clamped);
            const std::uint8_t want = c.code | (sign < 0 ? 0x8 : 0x0);
            EXPECT_EQ(code, want) << sign * c.y;
            EXPECT_EQ(clamped, c.clamped ? 1u : 0u) << sign * c.y;
        }
    }
    EXPECT_EQ(cast::e2m1_code(-0.0f), 0x8);  // -0 keeps its sign, as the FP8 casts do
    EXPECT_EQ(cast::e2m1_code(-1e-45f), 0x8);
}

TEST(E2M1, DecodeGivesEveryValueOfTheTable) {
    const float want[16] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, -0.0f, -0.5f, -1, -1.5f, -2, -3, -4, -6};
    for (int code = 0; code < 16; ++code) {
        const float v = cast::e2m1_value(static_cast<std::uint8_t>(code));
        EXPECT_EQ(std::bit_cast<std::uint32_t>(v), std::bit_cast<std::uint32_t>(want[code])) << code;
        EXPECT_EQ(cast::e2m1_code(v), code);  // every value is its own code
    }
}

// The nearest magnitude by search, ties to the even index, after clamping to 6.
std::uint8_t nearest_e2m1(float y) {
    const double a = std::min(std::fabs(double(y)), 6.0);
    int best = 0;
    for (int i = 1; i < 8; ++i) {
        const double d = std::fabs(a - kMag[i]), db = std::fabs(a - kMag[best]);
        if (d < db || (d == db && i % 2 == 0)) best = i;
    }
    return static_cast<std::uint8_t>(best | (std::signbit(y) ? 8 : 0));
}

TEST(E2M1, CastAgreesWithANearestValueSearchOverFloat32) {
    // Every 61st bit pattern below 16.0 (the grid and far past it), both signs.
    for (std::uint32_t u = 0; u < 0x41800000u; u += 61) {
        for (std::uint32_t s : {0u, 0x80000000u}) {
            const float y = std::bit_cast<float>(u | s);
            ASSERT_EQ(cast::e2m1_code(y), nearest_e2m1(y)) << y;
        }
    }
}

// ---- NVFP4 and MXFP4 blocks by hand -------------------------------------------------------

std::uint8_t code_at(const FP4Tensor& q, std::int64_t r, std::int64_t c) { return q.codes[r * q.cols + c]; }
std::uint8_t scale_at(const FP4Tensor& q, std::int64_t br, std::int64_t bc) {
    return q.scale_codes[br * q.scale_cols() + bc];
}

TEST(NVFP4, BlocksOfA17ColumnTensorByHand) {
    // A = 2688 = 448 * 6: S_enc = S_dec = 1, S_enc * (1/6) = float(1/6).
    // Row 0, block 0 (amax 6): 6 * float(1/6) = 1.00000003 -> 1.0f, s_b = 1, enc = 1: the
    //   elements are cast as they are (the ties of the table).
    // Row 0, block 1 (col 16 alone, amax 12): 12 * float(1/6) -> 2.0f, s_b = 2, enc = 0.5.
    // Row 1, block 0: all zero but a -0: s_b = 0, enc = min(1/0, FLT_MAX), codes 0 and 8.
    // Row 1, block 1 (col 16 alone, 2688): 448.0000134 -> 448.0f, s_b = 448, code 7.
    std::vector<float> x(2 * 17, 0.0f);
    const float row0[16] = {6, 0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5, -0.25f, -0.75f, -5, -6, 0, 1e-40f, 0.5f, -3};
    for (int c = 0; c < 16; ++c) x[c] = row0[c];
    x[16] = 12;
    x[17 + 3] = -0.0f;
    x[17 + 16] = 2688;
    const FP4Tensor q = quantize_fp4({x.data(), 2, 17}, NVFP4Scaling{});
    ASSERT_EQ(q.scale_rows(), 2);
    ASSERT_EQ(q.scale_cols(), 2);
    EXPECT_EQ(q.tensor_scale_inv, 1.0f);
    EXPECT_EQ(scale_at(q, 0, 0), kE4M3One);
    EXPECT_EQ(scale_at(q, 0, 1), kE4M3Two);
    EXPECT_EQ(scale_at(q, 1, 0), 0x00);
    EXPECT_EQ(scale_at(q, 1, 1), kE4M3Max);
    const std::uint8_t want0[16] = {7, 0, 2, 2, 4, 4, 6, 6, 8, 10, 14, 15, 0, 0, 1, 13};
    for (int c = 0; c < 16; ++c) EXPECT_EQ(code_at(q, 0, c), want0[c]) << c;
    EXPECT_EQ(code_at(q, 0, 16), 7);  // 12 * 0.5 = 6
    EXPECT_EQ(q.dequantize(0, 16), 12.0f);
    EXPECT_EQ(q.dequantize(0, 7), 4.0f);  // 5 -> 4 (tie to even)
    for (int c = 0; c < 16; ++c) EXPECT_EQ(code_at(q, 1, c), c == 3 ? 0x8 : 0x0) << c;
    EXPECT_EQ(code_at(q, 1, 16), 7);
    EXPECT_EQ(q.dequantize(1, 16), 2688.0f);  // (6 * 448) * 1
    // enc = float(1 / 448) rounds up: 2688 * enc = 6.0000005, clamped to 6. The tensor's
    // own amax saturates (counted as overflow) under the rule's rounding.
    EXPECT_EQ(2688.0f * (1.0f / 448.0f), 6.0000005f);
    EXPECT_EQ(q.overflow, 1);

    // The analysis counts the same: underflow 0.25 -> 0, -0.25 -> -0, 1e-40 -> 0 of the 17
    // nonzero elements; overflow 1 of 34.
    const Analysis a = analyze({x.data(), 2, 17}, {NVFP4Scaling{}}, {.threads = 1});
    EXPECT_DOUBLE_EQ(a.errors[0].underflow_pct, 100.0 * 3 / 17);
    EXPECT_DOUBLE_EQ(a.errors[0].overflow_pct, 100.0 / 34);
    EXPECT_EQ(a.errors[0].scale_inv_min, 0.0);    // the zero block: s_b * S_dec = 0
    EXPECT_EQ(a.errors[0].scale_inv_max, 448.0);
}

TEST(NVFP4, TiesUnderAScaleOfTwo) {
    // Row 0 (amax 12) under A = 2688 (row 1): s_b = 2, enc = 0.5 exactly, so x * enc
    // lands on the midpoints of the grid exactly.
    std::vector<float> x(2 * 16, 0.0f);
    const float r0[16] = {12, 0.5f, 1.5f, 2.5f, 3.5f, 5, 7, 10, 11, -10, -0.5f, -1.5f, 0, 4, 6, 9};
    for (int c = 0; c < 16; ++c) x[c] = r0[c];
    x[16] = 2688;
    const FP4Tensor q = quantize_fp4({x.data(), 2, 16}, NVFP4Scaling{});
    ASSERT_EQ(scale_at(q, 0, 0), kE4M3Two);
    // y = x / 2: 6, 0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5, 5.5, -5, -0.25, -0.75, 0, 2, 3, 4.5
    const std::uint8_t want[16] = {7, 0, 2, 2, 4, 4, 6, 6, 7, 14, 8, 10, 0, 4, 5, 6};
    const float deq[16] = {12, 0, 2, 2, 4, 4, 8, 8, 12, -8, -0.0f, -2, 0, 4, 6, 8};
    for (int c = 0; c < 16; ++c) {
        EXPECT_EQ(code_at(q, 0, c), want[c]) << c;
        EXPECT_EQ(std::bit_cast<std::uint32_t>(q.dequantize(0, c)), std::bit_cast<std::uint32_t>(deq[c])) << c;
    }
}

TEST(NVFP4, DenormalTensorAmaxHitsBothFlt_maxClamps) {
    // A = 1e-40f (a denormal): 2688 / A overflows, S_enc = FLT_MAX, S_dec = 1 / FLT_MAX =
    // 2^-128 (denormal). s_b = e4m3(1e-40 * (FLT_MAX * float(1/6))) = e4m3(0.005671) =
    // 3 * 2^-9 (E4M3 subnormal, code 0x03); s_b * S_dec = 3 * 2^-137, whose reciprocal
    // overflows: enc = FLT_MAX. x * enc = 0.034 for the amax: every code is 0 (underflow).
    const std::vector<float> x = {1e-40f, -5e-41f, 0.0f, 1e-45f};
    const FP4Tensor q = quantize_fp4({x.data(), 1, 4}, NVFP4Scaling{});
    EXPECT_EQ(q.tensor_scale_inv, std::ldexp(1.0f, -128));
    EXPECT_EQ(scale_at(q, 0, 0), 0x03);
    EXPECT_EQ(code_at(q, 0, 0), 0x0);
    EXPECT_EQ(code_at(q, 0, 1), 0x8);
    const Analysis a = analyze({x.data(), 1, 4}, {NVFP4Scaling{}}, {.threads = 1});
    EXPECT_EQ(a.errors[0].underflow_pct, 100.0);
    EXPECT_EQ(a.errors[0].overflow_pct, 0.0);
    // The rule's own steps, checked one by one.
    EXPECT_EQ(cast::nvfp4_tensor_scale(1e-40f), FLT_MAX);
    const cast::FP4BlockScale b = cast::nvfp4_block_scale(std::bit_cast<std::uint32_t>(1e-40f), FLT_MAX, q.tensor_scale_inv);
    EXPECT_EQ(b.scale, 3.0f * std::ldexp(1.0f, -9));
    EXPECT_EQ(b.enc, FLT_MAX);
}

TEST(NVFP4, ScaleThatRoundsToZeroSaturatesItsElementsToZero) {
    // A = FLT_MAX: S_enc = 2688 / FLT_MAX. A block of amax 1e30 gets 1e30 * S_enc / 6 =
    // 1.3e-6, below half the least E4M3 subnormal: s_b = 0, enc = min(1/0, FLT_MAX) =
    // FLT_MAX, 1e30 * FLT_MAX = Inf: clamped to 6 (code 7, counted as overflow), and
    // x' = 6 * 0 * S_dec = 0.
    std::vector<float> x(32, 0.0f);
    x[0] = FLT_MAX;
    x[16] = 1e30f;
    x[17] = -1e30f;
    const FP4Tensor q = quantize_fp4({x.data(), 1, 32}, NVFP4Scaling{});
    EXPECT_EQ(scale_at(q, 0, 0), kE4M3Max);
    EXPECT_EQ(scale_at(q, 0, 1), 0x00);
    EXPECT_EQ(code_at(q, 0, 16), 7);
    EXPECT_EQ(code_at(q, 0, 17), 15);
    EXPECT_EQ(q.dequantize(0, 16), 0.0f);
    EXPECT_EQ(code_at(q, 0, 0), 7);  // FLT_MAX * enc = 6.0 exactly: not clamped
    EXPECT_EQ(q.overflow, 2);
    // The block amax times S_enc / 6 past FLT_MAX (only an Inf block reaches it in a
    // tensor, and that is a NaN block) clamps to FLT_MAX, then to E4M3's 448.
    const cast::FP4BlockScale big = cast::nvfp4_block_scale(std::bit_cast<std::uint32_t>(1e30f), 1e30f, 1e-30f);
    EXPECT_EQ(big.code, kE4M3Max);
    EXPECT_EQ(big.scale, 448.0f);
}

TEST(NVFP4, TensorScaleEdgeCases) {
    EXPECT_EQ(cast::nvfp4_tensor_scale(0.0f), 1.0f);
    EXPECT_EQ(cast::nvfp4_tensor_scale(kInf), 1.0f);  // 2688 / Inf = 0 -> 1
    EXPECT_EQ(cast::nvfp4_tensor_scale(kNaN), 1.0f);
    EXPECT_EQ(cast::nvfp4_tensor_scale(2688.0f), 1.0f);
    EXPECT_EQ(cast::nvfp4_tensor_scale(672.0f), 4.0f);
}

TEST(NVFP4, BlockWithNaNOrInfIsNaNAndTheTensorScaleIsOne) {
    // Block 0 holds Inf: A = Inf, S_enc = 1. Block 0's scale is E4M3 NaN, its codes 0 and
    // every x' NaN; block 1 (amax 3): 3 * float(1/6) -> 0.5, s_b = 0.5, enc = 2.
    std::vector<float> x(32, 1.0f);
    x[5] = kInf;
    x[16] = 3.0f;
    x[17] = 1.25f;  // 2.5 -> 2 (tie to even): x' = 1
    const FP4Tensor q = quantize_fp4({x.data(), 1, 32}, NVFP4Scaling{});
    EXPECT_EQ(q.tensor_scale_inv, 1.0f);
    EXPECT_EQ(scale_at(q, 0, 0), kE4M3NaN);
    EXPECT_EQ(scale_at(q, 0, 1), kE4M3Half);
    EXPECT_EQ(code_at(q, 0, 0), 0);
    EXPECT_TRUE(std::isnan(q.dequantize(0, 0)));
    EXPECT_EQ(code_at(q, 0, 16), 7);
    EXPECT_EQ(q.dequantize(0, 16), 3.0f);
    EXPECT_EQ(q.dequantize(0, 17), 1.0f);
    const Analysis a = analyze({x.data(), 1, 32}, {NVFP4Scaling{}}, {.threads = 1});
    EXPECT_EQ(a.errors[0].nonfinite_out, 15);  // block 0's finite elements
    EXPECT_EQ(a.errors[0].overflow_pct, 0.0);
    EXPECT_EQ(a.errors[0].underflow_pct, 0.0);
    EXPECT_EQ(a.errors[0].scale_inv_max, 0.5);  // the NaN block's scale is skipped

    x[5] = kNaN;  // NaN: the same rule; A ignores it (A = 3, S_enc = 896)
    const FP4Tensor n = quantize_fp4({x.data(), 1, 32}, NVFP4Scaling{});
    EXPECT_EQ(scale_at(n, 0, 0), kE4M3NaN);
    EXPECT_EQ(n.tensor_scale_inv, 1.0f / 896.0f);
}

TEST(NVFP4, TwoDimensionalTilesOn20x20) {
    // 16x16 tiles: (0,0) 16x16, (0,1) 16x4, (1,0) 4x16, (1,1) 4x4, each with its own amax:
    // 6, 12, 3 and 2688 (A = 2688, S_enc = 1): s_b = 1, 2, 0.5, 448.
    const float amax[2][2] = {{6, 12}, {3, 2688}};
    std::vector<float> x(400);
    for (int r = 0; r < 20; ++r)
        for (int c = 0; c < 20; ++c) x[r * 20 + c] = (r == c || r == 19 - c) ? amax[r / 16][c / 16] : 0.5f;
    const FP4Tensor q = quantize_fp4({x.data(), 20, 20}, NVFP4Scaling{true});
    ASSERT_EQ(q.scale_rows(), 2);
    ASSERT_EQ(q.scale_cols(), 2);
    EXPECT_EQ(scale_at(q, 0, 0), kE4M3One);
    EXPECT_EQ(scale_at(q, 0, 1), kE4M3Two);
    EXPECT_EQ(scale_at(q, 1, 0), kE4M3Half);
    EXPECT_EQ(scale_at(q, 1, 1), kE4M3Max);
    EXPECT_EQ(code_at(q, 0, 1), 1);  // 0.5 * 1
    EXPECT_EQ(code_at(q, 0, 17), 0);  // 0.5 * 0.5 = 0.25: tie to 0
    EXPECT_EQ(code_at(q, 17, 1), 2);  // 0.5 * 2 = 1
    EXPECT_EQ(code_at(q, 16, 16), 7);
    EXPECT_EQ(q.dequantize(16, 16), 2688.0f);
    // 1x16 blocks of the same tensor: a 20 x 2 grid, row 0's second block is cols 16-19.
    const FP4Tensor q1 = quantize_fp4({x.data(), 20, 20}, NVFP4Scaling{false});
    EXPECT_EQ(q1.scale_rows(), 20);
    EXPECT_EQ(q1.scale_cols(), 2);
    EXPECT_EQ(scale_at(q1, 0, 1), kE4M3Two);  // x[0][19] = 12 (the anti-diagonal)
    // Row 5's second block holds only 0.5: 0.5 * float(1/6) = 0.0833, E4M3 1.375 * 2^-4.
    EXPECT_EQ(scale_at(q1, 5, 1), 0x1B);
}

TEST(MXFP4, BlocksOfA33ColumnTensorByHand) {
    // Row 0: block [0, 32) amax 7, edge block [32] = 0.8. Row 1: all zero, edge -0.
    std::vector<float> x(66, 0.0f);
    x[0] = 7;
    x[1] = 1.25f;
    x[2] = 6;
    x[32] = 0.8f;
    x[33 + 32] = -0.0f;
    // Floor: 7 -> e = floor(log2 7) - 2 = 0: 7 clamps to 6; 0.8 -> e = -1 - 2 = -3:
    // 0.8 * 8 = 6.4 clamps to 6, x' = 0.75. RCEIL: 7 = 1.75 * 2^2 -> e = 1: 3.5 -> 4, x' = 8;
    // 0.8 = 1.6 * 2^-1 -> e = -2: 3.2 -> 3, x' = 0.75. Zero blocks: e = -127.
    const FP4Tensor f = quantize_fp4({x.data(), 2, 33}, MXFP4Scaling{MXRule::Floor});
    const FP4Tensor r = quantize_fp4({x.data(), 2, 33}, MXFP4Scaling{MXRule::RCeil});
    ASSERT_EQ(f.scale_cols(), 2);
    EXPECT_EQ(f.tensor_scale_inv, 1.0f);
    EXPECT_EQ(scale_at(f, 0, 0), 127);
    EXPECT_EQ(scale_at(f, 0, 1), 124);
    EXPECT_EQ(scale_at(f, 1, 0), 0);
    EXPECT_EQ(scale_at(f, 1, 1), 0);
    EXPECT_EQ(code_at(f, 0, 0), 7);
    EXPECT_EQ(code_at(f, 0, 1), 2);  // 1.25 -> 1
    EXPECT_EQ(code_at(f, 0, 2), 7);
    EXPECT_EQ(f.dequantize(0, 0), 6.0f);
    EXPECT_EQ(code_at(f, 0, 32), 7);
    EXPECT_EQ(f.dequantize(0, 32), 0.75f);
    EXPECT_EQ(code_at(f, 1, 32), 0x8);
    EXPECT_EQ(f.overflow, 2);
    EXPECT_EQ(scale_at(r, 0, 0), 128);
    EXPECT_EQ(scale_at(r, 0, 1), 125);
    EXPECT_EQ(code_at(r, 0, 0), 6);
    EXPECT_EQ(r.dequantize(0, 0), 8.0f);
    EXPECT_EQ(code_at(r, 0, 1), 1);  // 0.625 -> 0.5
    EXPECT_EQ(code_at(r, 0, 2), 5);  // 3
    EXPECT_EQ(code_at(r, 0, 32), 5);
    EXPECT_EQ(r.dequantize(0, 32), 0.75f);
    EXPECT_EQ(r.overflow, 0);
    // 6 = 1.5 * 2^2 is not past 1.5: RCEIL keeps e = 0 like floor.
    EXPECT_EQ(cast::mxfp4_block_scale(std::bit_cast<std::uint32_t>(6.0f), MXRule::RCeil).code, 127);
}

TEST(MXFP4, DenormalAndLargestAmaxes) {
    const auto scale = [](float amax, MXRule rule) { return cast::mxfp4_block_scale(std::bit_cast<std::uint32_t>(amax), rule); };
    for (MXRule rule : {MXRule::Floor, MXRule::RCeil}) {
        // A denormal amax: e clamps to -127 (E8M0 0), s = 2^127, scale 2^-127.
        const cast::FP4BlockScale d = scale(1e-40f, rule);
        EXPECT_EQ(d.code, 0);
        EXPECT_EQ(d.enc, std::ldexp(1.0f, 127));
        EXPECT_EQ(d.scale, std::ldexp(1.0f, -127));
        EXPECT_EQ(scale(0.0f, rule).code, 0);
    }
    // FLT_MAX = 1.99999988 * 2^127: floor e = 125, RCEIL e = 126; both stay below 127.
    EXPECT_EQ(scale(FLT_MAX, MXRule::Floor).code, 127 + 125);
    EXPECT_EQ(scale(FLT_MAX, MXRule::RCeil).code, 127 + 126);
    EXPECT_EQ(scale(kInf, MXRule::Floor).code, kE8M0NaN);

    // 2^-127 (denormal) under e = -127 is 1 exactly; 2^-130 is 0.125: underflow.
    const std::vector<float> x = {std::ldexp(1.0f, -127), std::ldexp(1.0f, -130)};
    const FP4Tensor q = quantize_fp4({x.data(), 1, 2}, MXFP4Scaling{MXRule::Floor});
    EXPECT_EQ(scale_at(q, 0, 0), 0);
    EXPECT_EQ(code_at(q, 0, 0), 2);
    EXPECT_EQ(q.dequantize(0, 0), std::ldexp(1.0f, -127));
    EXPECT_EQ(code_at(q, 0, 1), 0);
    const Analysis a = analyze({x.data(), 1, 2}, {MXFP4Scaling{MXRule::Floor}}, {.threads = 1});
    EXPECT_EQ(a.errors[0].underflow_pct, 50.0);
}

TEST(MXFP4, BlockWithNaNIsNaN) {
    std::vector<float> x(64, 1.0f);
    x[40] = kNaN;
    const FP4Tensor q = quantize_fp4({x.data(), 1, 64}, MXFP4Scaling{});
    EXPECT_EQ(scale_at(q, 0, 0), 125);  // RCEIL, amax 1 = 1.0 * 2^0: e = -2
    EXPECT_EQ(code_at(q, 0, 0), 6);     // 1 * 4 = 4
    EXPECT_EQ(scale_at(q, 0, 1), kE8M0NaN);
    EXPECT_EQ(code_at(q, 0, 41), 0);
    EXPECT_TRUE(std::isnan(q.dequantize(0, 41)));
    const Analysis a = analyze({x.data(), 1, 64}, {MXFP4Scaling{}}, {.threads = 1});
    EXPECT_EQ(a.errors[0].nonfinite_out, 31);
    EXPECT_EQ(a.errors[0].scale_inv_min, 0.25);
    EXPECT_EQ(a.errors[0].scale_inv_max, 0.25);
}

// ---- analyze() against a float64 reference --------------------------------------------

// numerics.md's rules with plain float32 steps (no cast_rules.h), E4M3 by format.cpp's
// encode(), E2M1 by nearest_e2m1(): x' per element (NaN in NaN blocks), clamped count.
struct RefFP4 {
    std::vector<float> deq;
    std::vector<std::uint8_t> codes;
    std::int64_t clamped = 0;
    std::vector<float> block_scale_inv;  // scale * dec per block, NaN blocks left out
};

int mx_exponent_by_search(float amax, MXRule rule) {
    if (amax == 0.0f) return -127;
    int e = -127;
    if (rule == MXRule::RCeil) {
        while (e < 127 && double(amax) > 6.0 * std::ldexp(1.0, e)) ++e;
    } else {
        int k;
        std::frexp(double(amax), &k);  // amax = f 2^k, f in [0.5, 1): floor(log2 amax) = k - 1
        e = std::max(-127, std::min(127, k - 1 - 2));
    }
    return e;
}

RefFP4 reference(const std::vector<float>& x, std::int64_t rows, std::int64_t cols, const Recipe& recipe) {
    const auto* nv = std::get_if<NVFP4Scaling>(&recipe);
    const std::int64_t br = nv && nv->two_d ? 16 : 1, bc = nv ? 16 : 32;
    float A = 0;
    for (float v : x)
        if (!std::isnan(v)) A = std::max(A, std::fabs(v));
    float s_enc = A == 0.0f ? 1.0f : std::min(2688.0f / A, FLT_MAX);
    if (s_enc == 0.0f) s_enc = 1.0f;
    const float s_dec = 1.0f / s_enc;
    RefFP4 out;
    out.deq.assign(x.size(), 0.0f);
    out.codes.assign(x.size(), 0);
    for (std::int64_t r0 = 0; r0 < rows; r0 += br) {
        for (std::int64_t c0 = 0; c0 < cols; c0 += bc) {
            const std::int64_t r1 = std::min(rows, r0 + br), c1 = std::min(cols, c0 + bc);
            float amax = 0;
            bool nonfinite = false;
            for (std::int64_t r = r0; r < r1; ++r)
                for (std::int64_t c = c0; c < c1; ++c) {
                    const float v = x[r * cols + c];
                    nonfinite = nonfinite || !std::isfinite(v);
                    if (std::isfinite(v)) amax = std::max(amax, std::fabs(v));
                }
            float enc = kNaN, scale = kNaN, dec = kNaN;
            if (!nonfinite && nv) {
                const float t = s_enc * (1.0f / 6.0f);
                scale = decode(Format::E4M3, encode(Format::E4M3, std::min(amax * t, FLT_MAX)));
                enc = std::min(1.0f / (scale * s_dec), FLT_MAX);
                dec = s_dec;
            } else if (!nonfinite) {
                const int e = mx_exponent_by_search(amax, std::get<MXFP4Scaling>(recipe).rule);
                enc = std::ldexp(1.0f, -e);
                scale = std::ldexp(1.0f, e);
                dec = 1.0f;
            }
            if (!nonfinite) out.block_scale_inv.push_back(scale * dec);
            for (std::int64_t r = r0; r < r1; ++r)
                for (std::int64_t c = c0; c < c1; ++c) {
                    const std::size_t i = std::size_t(r * cols + c);
                    if (nonfinite) {
                        out.deq[i] = kNaN;
                        continue;
                    }
                    const float y = x[i] * enc;
                    out.clamped += std::fabs(y) > 6.0f;
                    out.codes[i] = nearest_e2m1(y);
                    const float m = kMag[out.codes[i] & 7] * (out.codes[i] & 8 ? -1.0f : 1.0f);
                    out.deq[i] = (m * scale) * dec;
                }
        }
    }
    return out;
}

TEST(FP4Analysis, FiguresMatchAFloat64ReferenceOnRandomTensors) {
    const std::vector<Recipe> recipes = fp4_analysis_recipes();
    const ref::DataKind kinds[] = {ref::DataKind::Gaussian, ref::DataKind::OutlierColumns, ref::DataKind::Tiny,
                                   ref::DataKind::MixedZeros, ref::DataKind::NonFinite};
    for (ref::DataKind kind : kinds) {
        const std::int64_t rows = 150, cols = 301;  // edge blocks both ways
        const std::vector<float> x = ref::make_data(kind, rows, cols, 7);
        const Analysis a = analyze({x.data(), rows, cols}, recipes, {.threads = 3});
        const Analysis a1 = analyze({x.data(), rows, cols}, recipes, {.threads = 1});
        for (std::size_t k = 0; k < recipes.size(); ++k) {
            const std::string what = std::string(ref::data_kind_name(kind)) + " " + recipe_name(recipes[k]);
            const RefFP4 want = reference(x, rows, cols, recipes[k]);
            // ref::error_stats sums the figures in float64; it reads underflow off E4M3 codes,
            // so it gets a stand-in code: 0 where the E2M1 code is +-0, NaN in NaN blocks.
            ref::Quantized rq;
            rq.rows = rows, rq.cols = cols;
            rq.dequantized = want.deq;
            rq.overflow = want.clamped;
            rq.scale_inv = want.block_scale_inv;
            for (std::size_t i = 0; i < x.size(); ++i)
                rq.codes.push_back(std::isnan(want.deq[i]) ? kE4M3NaN : (want.codes[i] & 7) == 0 ? 0x00 : kE4M3One);
            const ErrorStats w = ref::error_stats({x.data(), rows, cols}, rq);
            const ErrorStats& e = a.errors[k];
            EXPECT_EQ(e.recipe, recipe_name(recipes[k]));
            for (auto [got, ref_value] : {std::pair{e.sqnr_db, w.sqnr_db}, {e.mse, w.mse}, {e.rel_l2, w.rel_l2},
                                          {e.cosine, w.cosine}, {e.amax, w.amax}})
                EXPECT_TRUE(ref::close(got, ref_value, 1e-9)) << what << ": " << got << " vs " << ref_value;
            EXPECT_EQ(e.max_abs_err, w.max_abs_err) << what;
            EXPECT_EQ(e.nonfinite_out, w.nonfinite_out) << what;
            EXPECT_DOUBLE_EQ(e.underflow_pct, w.underflow_pct) << what;
            EXPECT_DOUBLE_EQ(e.overflow_pct, w.overflow_pct) << what;
            EXPECT_EQ(e.scale_inv_min, w.scale_inv_min) << what;
            EXPECT_EQ(e.scale_inv_max, w.scale_inv_max) << what;
            EXPECT_GT(w.underflow_pct + w.overflow_pct, 0.0) << what;  // the counts are exercised
            // The thread count changes nothing, bit for bit.
            EXPECT_EQ(std::bit_cast<std::uint64_t>(e.sqnr_db), std::bit_cast<std::uint64_t>(a1.errors[k].sqnr_db)) << what;
            // quantize_fp4 (the dumps) gives the reference's codes and x'.
            const FP4Tensor q = quantize_fp4({x.data(), rows, cols}, recipes[k], 2);
            ASSERT_EQ(q.codes, want.codes) << what;
            EXPECT_EQ(q.overflow, want.clamped) << what;
            for (std::int64_t i = 0; i < rows * cols; ++i) {
                const float got = q.dequantize(i / cols, i % cols), w = want.deq[std::size_t(i)];
                ASSERT_TRUE(std::isnan(w) ? std::isnan(got) : got == w) << what << " at " << i;
            }
        }
    }
}

}  // namespace
}  // namespace fp8scope
