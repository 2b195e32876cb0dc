// quantize(), fake_quantize() and dequantize() against the float64 reference over a grid
// of awkward shapes, data kinds and recipes (codes and scales bit for bit), and the scale
// rules on hand-checked cases.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "cpu/quantize.h"
#include "fp8/cast_rules.h"
#include "reference/reference.h"

namespace fp8scope {
namespace {

using ref::DataKind;

struct Shape {
    std::int64_t rows, cols;
};

std::vector<Recipe> all_test_recipes() {
    std::vector<Recipe> r = default_analysis_recipes();
    r.push_back(DelayedScaling{});
    r.push_back(DelayedScaling{Format::E5M2, 16, AmaxAlgo::MostRecent, 1});
    r.push_back(BlockScaling{Format::E5M2, 1, 128, false});
    r.push_back(BlockScaling{Format::E5M2, 128, 128, true});
    r.push_back(CurrentScaling{Format::E4M3, 1e-3f, false});
    r.push_back(CurrentScaling{Format::E5M2, 1e-3f, true});
    r.push_back(BlockScaling{Format::E4M3, 3, 40, false});  // shape that divides nothing
    r.push_back(MXScaling{Format::E4M3, MXRule::RCeil, 16});
    return r;
}

bool same_float(float a, float b) {
    return std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(b) || (std::isnan(a) && std::isnan(b));
}

class QuantizeGrid : public ::testing::TestWithParam<std::tuple<Shape, DataKind>> {};

TEST_P(QuantizeGrid, MatchesReferenceForEveryRecipe) {
    const auto [shape, kind] = GetParam();
    const std::vector<float> data = ref::make_data(kind, shape.rows, shape.cols, 7);
    const MatrixView x{data.data(), shape.rows, shape.cols};
    std::vector<float> fake(x.size()), deq(x.size());
    for (const Recipe& recipe : all_test_recipes()) {
        SCOPED_TRACE(recipe_name(recipe));
        const ref::Quantized want = ref::quantize(x, recipe);
        const QuantizedTensor q = quantize(x, recipe, nullptr, 2);
        ASSERT_EQ(q.block_rows, want.block_rows);
        ASSERT_EQ(q.block_cols, want.block_cols);
        ASSERT_EQ(q.codes, want.codes);
        ASSERT_EQ(q.scale_inv.size(), want.scale_inv.size());
        for (std::size_t i = 0; i < q.scale_inv.size(); ++i) ASSERT_TRUE(same_float(q.scale_inv[i], want.scale_inv[i])) << i;
        EXPECT_EQ(q.scale_e8m0, want.e8m0);
        EXPECT_EQ(q.overflow, want.overflow);

        fake_quantize(x, recipe, fake.data(), nullptr, 2);
        dequantize(q, deq.data());
        for (std::int64_t i = 0; i < x.size(); ++i) {
            ASSERT_TRUE(same_float(fake[i], want.dequantized[i])) << "fake_quantize at " << i << ": " << fake[i]
                                                                  << " vs " << want.dequantized[i];
            ASSERT_TRUE(same_float(deq[i], want.dequantized[i])) << "dequantize at " << i;
        }
        if (x.size() > 0) {
            const std::int64_t r = x.rows - 1, c = x.cols / 2;
            EXPECT_TRUE(same_float(q.dequantize(r, c), want.dequantized[r * x.cols + c]));
        }
    }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, QuantizeGrid,
    ::testing::Combine(::testing::Values(Shape{1, 16}, Shape{217, 256}, Shape{300, 200}, Shape{128, 4096},
                                         Shape{3, 1}, Shape{129, 130}, Shape{1, 1000}, Shape{0, 5}),
                       ::testing::Values(DataKind::Gaussian, DataKind::OutlierColumns, DataKind::Tiny,
                                         DataKind::MixedZeros, DataKind::NonFinite)),
    [](const auto& info) {
        const Shape s = std::get<0>(info.param);
        return std::to_string(s.rows) + "x" + std::to_string(s.cols) + "_" +
               ref::data_kind_name(std::get<1>(info.param));
    });

TEST(ScaleRule, HandCheckedCurrentScaling) {
    const float inf = std::numeric_limits<float>::infinity();
    EXPECT_EQ(compute_scale(0.0f, Format::E4M3, 0.0f, false), 1.0f);
    EXPECT_EQ(compute_scale(inf, Format::E4M3, 0.0f, false), 1.0f);
    EXPECT_EQ(compute_scale(std::numeric_limits<float>::quiet_NaN(), Format::E4M3, 0.0f, false), 1.0f);
    EXPECT_EQ(compute_scale(2.0f, Format::E4M3, 0.0f, false), 224.0f);
    EXPECT_EQ(compute_scale(2.0f, Format::E5M2, 0.0f, false), 28672.0f);
    EXPECT_EQ(compute_scale(3.0f, Format::E4M3, 0.0f, false), 448.0f / 3.0f);
    EXPECT_EQ(compute_scale(3.0f, Format::E4M3, 0.0f, true), 128.0f);  // 149.33 rounds down
    EXPECT_EQ(compute_scale(1e-45f, Format::E4M3, 0.0f, false), FLT_MAX);  // quotient overflows
    EXPECT_EQ(compute_scale(1e-45f, Format::E4M3, 0.0f, true), 0x1p127f);
    EXPECT_EQ(compute_scale(0.0f, Format::E4M3, 0.5f, false), 896.0f);  // eps clamps first
    EXPECT_EQ(compute_scale(4.0f, Format::E4M3, 0.5f, false), 112.0f);
}

TEST(ScaleRule, HandCheckedMXExponents) {
    EXPECT_EQ(mx_exponent(448.0f, Format::E4M3, MXRule::RCeil), 0);
    EXPECT_EQ(mx_exponent(std::nextafter(448.0f, 1e9f), Format::E4M3, MXRule::RCeil), 1);
    EXPECT_EQ(mx_exponent(448.0f, Format::E4M3, MXRule::Floor), 0);
    EXPECT_EQ(mx_exponent(511.0f, Format::E4M3, MXRule::Floor), 0);
    EXPECT_EQ(mx_exponent(512.0f, Format::E4M3, MXRule::Floor), 1);
    EXPECT_EQ(mx_exponent(57344.0f, Format::E5M2, MXRule::RCeil), 0);
    EXPECT_EQ(mx_exponent(57344.0f, Format::E5M2, MXRule::Floor), 0);
    EXPECT_EQ(mx_exponent(1.0f, Format::E4M3, MXRule::Floor), -8);
    EXPECT_EQ(mx_exponent(1.0f, Format::E4M3, MXRule::RCeil), -8);   // 1 <= 448 * 2^-8 = 1.75
    EXPECT_EQ(mx_exponent(1.8f, Format::E4M3, MXRule::RCeil), -7);
    EXPECT_EQ(mx_exponent(0.0f, Format::E4M3, MXRule::RCeil), -127);
    EXPECT_EQ(mx_exponent(FLT_MAX, Format::E4M3, MXRule::Floor), 119);
    EXPECT_EQ(mx_exponent(FLT_MAX, Format::E4M3, MXRule::RCeil), 120);
    EXPECT_EQ(mx_exponent(std::numeric_limits<float>::denorm_min(), Format::E4M3, MXRule::Floor), -127);
    EXPECT_EQ(mx_exponent(0x1p-120f, Format::E4M3, MXRule::RCeil), -127);  // -128 clamps
    EXPECT_EQ(mx_exponent(0x1.ep-130f, Format::E5M2, MXRule::RCeil), -127);  // subnormal amax
    EXPECT_EQ(mx_exponent(0x1.ep-100f, Format::E5M2, MXRule::RCeil), -114);  // 1.875 > 1.75
}

// MX exponents by their definition, in float64 (shares nothing with cast_rules.h's reading
// of the exponent field): Floor e = floor(log2 amax) - emax; RCeil the least e with
// amax <= fp8_max * 2^e; both clamped to [-127, 127].
int mx_exponent_by_definition(float amax, Format f, MXRule rule) {
    if (!(amax > 0.0f)) return -127;
    int e = std::ilogb(amax) - info(f).emax;
    if (rule == MXRule::RCeil && static_cast<double>(amax) > std::ldexp(static_cast<double>(fp8_max(f)), e)) ++e;
    return std::clamp(e, -127, 127);
}

// Every BF16 amax, for every float32 exponent the mantissas around RCEIL's threshold
// (1.75) and at the ends, and random patterns: the exponent, and the MX block scale the
// kernels take (s = 2^-e, scale_inv = 2^e, E8M0 e + 127), against the definition.
TEST(ScaleRule, MXExponentAndBlockScaleMatchTheDefinition) {
    std::vector<std::uint32_t> amaxes;
    for (std::uint32_t h = 0; h < 0x7F80u; ++h) amaxes.push_back(h << 16);
    for (std::uint32_t e = 0; e < 255; ++e)
        for (std::uint32_t m : {0u, 1u, 2u, 0x3FFFFFu, 0x400000u, 0x5FFFFFu, 0x600000u, 0x600001u, 0x7FFFFEu, 0x7FFFFFu})
            amaxes.push_back(e << 23 | m);
    std::mt19937 rng(7);
    for (int i = 0; i < 200000; ++i) amaxes.push_back(rng() % 0x7F800000u);
    for (Format f : {Format::E4M3, Format::E5M2})
        for (MXRule rule : {MXRule::Floor, MXRule::RCeil}) {
            for (std::uint32_t bits : amaxes) {
                const float amax = std::bit_cast<float>(bits);
                const int e = mx_exponent_by_definition(amax, f, rule);
                ASSERT_EQ(mx_exponent(amax, f, rule), e) << std::hex << bits;
                const cast::BlockScale b = cast::block_scale(bits, f, true, rule, false);
                ASSERT_EQ(b.e8m0, e8m0_from_exponent(e)) << std::hex << bits;
                ASSERT_EQ(b.s, std::ldexp(1.0f, -e)) << std::hex << bits;
                ASSERT_EQ(b.scale_inv, std::ldexp(1.0f, e)) << std::hex << bits;
            }
            // NaN or Inf in the block: all NaN, E8M0 0xFF
            for (std::uint32_t bits : {0x7F800000u, 0x7FC00000u, 0xFFFFFFFFu}) {
                const cast::BlockScale b = cast::block_scale(bits, f, true, rule, false);
                EXPECT_EQ(b.e8m0, kE8M0NaN);
                EXPECT_TRUE(std::isnan(b.s) && std::isnan(b.scale_inv));
            }
        }
}

// The per-tensor and blockwise scale against its definition in float64 (division of two
// floats rounded once more to float32 is exact rounding: 53 >= 2 * 24 + 2), pow2 as the
// largest power of two not above it; blockwise scale_inv is 1 / s and E8M0 unused.
TEST(ScaleRule, CurrentAndBlockScalesMatchTheDefinition) {
    std::mt19937 rng(11);
    for (Format f : {Format::E4M3, Format::E5M2})
        for (int i = 0; i < 200000; ++i) {
            const auto bits = static_cast<std::uint32_t>(rng() % 0x7F800001u);  // up to +Inf
            const float amax = std::bit_cast<float>(bits);
            float want = 1.0f;
            if (amax != 0.0f && std::isfinite(amax)) {
                const double q = static_cast<double>(fp8_max(f)) / static_cast<double>(amax);
                want = q > FLT_MAX ? FLT_MAX : static_cast<float>(q);
            }
            const float want_pow2 = want == 1.0f ? 1.0f : std::ldexp(1.0f, std::ilogb(want));
            ASSERT_EQ(compute_scale(amax, f, 0.0f, false), want) << std::hex << bits;
            ASSERT_EQ(compute_scale(amax, f, 0.0f, true), want_pow2) << std::hex << bits;
            for (bool pow2 : {false, true}) {
                const cast::BlockScale b = cast::block_scale(bits, f, false, MXRule::RCeil, pow2);
                ASSERT_EQ(b.s, pow2 ? want_pow2 : want) << std::hex << bits;
                ASSERT_EQ(b.scale_inv, 1.0f / b.s) << std::hex << bits;
                ASSERT_EQ(b.e8m0, 0);
            }
        }
}

// pow2 over its whole range, the float32 subnormals included, against ldexp.
TEST(ScaleRule, Pow2IsLdexp) {
    for (int e = -149; e <= 127; ++e) ASSERT_EQ(cast::pow2(e), std::ldexp(1.0f, e)) << e;
}

// Delayed scaling's next scale against ldexp of the float32 quotient: margins far past
// the float32 range in both directions (the rule clamps them at 400), results that round
// to subnormals, underflow to 0 (the previous scale kept) and overflow (FLT_MAX).
TEST(ScaleRule, DelayedNextScaleMatchesLdexp) {
    const float prev = 3.0f;
    std::mt19937 rng(5);
    for (Format f : {Format::E4M3, Format::E5M2})
        for (int margin : {-1000, -401, -400, -300, -130, -1, 0, 1, 2, 7, 120, 140, 149, 150, 160, 300, 400, 401, 1000})
            for (int i = 0; i < 2000; ++i) {
                const float ref = std::bit_cast<float>(static_cast<std::uint32_t>(rng() % 0x7F800000u));
                float want = prev;
                if (ref != 0.0f) {
                    const float s = std::ldexp(fp8_max(f) / ref, -margin);
                    want = std::isinf(s) ? FLT_MAX : (s == 0.0f ? prev : s);
                }
                ASSERT_EQ(cast::delayed_next_scale(ref, prev, f, margin), want) << ref << " margin " << margin;
            }
    for (float bad : {0.0f, std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()})
        EXPECT_EQ(cast::delayed_next_scale(bad, prev, Format::E4M3, 0), prev);
}

// One 1x32 MX block with amax 500: floor keeps X = 1 and clamps 500 to 448; RCEIL takes
// X = 2, so 500 / 2 = 250 rounds to 256 and dequantizes to 512.
TEST(Quantize, MXBlockFloorVersusRCeil) {
    std::vector<float> x(32, 1.0f);
    x[5] = 500.0f;
    x[6] = -3.0f;
    const MatrixView v{x.data(), 1, 32};
    const QuantizedTensor f = quantize(v, MXScaling{Format::E4M3, MXRule::Floor, 32});
    ASSERT_EQ(f.scale_e8m0.size(), 1u);
    EXPECT_EQ(f.scale_e8m0[0], 127);
    EXPECT_EQ(f.scale_inv[0], 1.0f);
    EXPECT_EQ(f.dequantize(0, 5), 448.0f);
    EXPECT_EQ(f.dequantize(0, 6), -3.0f);
    EXPECT_EQ(f.overflow, 1);
    const QuantizedTensor c = quantize(v, MXScaling{Format::E4M3, MXRule::RCeil, 32});
    EXPECT_EQ(c.scale_e8m0[0], 128);
    EXPECT_EQ(c.scale_inv[0], 2.0f);
    EXPECT_EQ(c.dequantize(0, 5), 512.0f);
    EXPECT_EQ(c.dequantize(0, 0), 1.0f);
    EXPECT_EQ(c.overflow, 0);
}

TEST(Quantize, MXBlockWithInfIsNaN) {
    std::vector<float> x(64, 2.0f);
    x[40] = std::numeric_limits<float>::infinity();
    const QuantizedTensor q = quantize(MatrixView{x.data(), 1, 64}, MXScaling{Format::E4M3, MXRule::RCeil, 32});
    EXPECT_EQ(q.scale_e8m0[0], 127 - 7);  // 2 <= 448 * 2^-7 = 3.5
    EXPECT_EQ(q.scale_e8m0[1], kE8M0NaN);
    EXPECT_EQ(q.dequantize(0, 3), 2.0f);
    for (int c = 32; c < 64; ++c) EXPECT_TRUE(std::isnan(q.dequantize(0, c))) << c;
}

// Current scaling of a tensor holding Inf: the amax is Inf, so s = 1; Inf saturates
// without counting as overflow.
TEST(Quantize, InfInTensorGivesUnitScale) {
    std::vector<float> x = {1.0f, std::numeric_limits<float>::infinity(), 2.5f, 1000.0f};
    const QuantizedTensor q = quantize(MatrixView{x.data(), 1, 4}, CurrentScaling{});
    EXPECT_EQ(q.scale_inv[0], 1.0f);
    EXPECT_EQ(q.dequantize(0, 0), 1.0f);
    EXPECT_EQ(q.dequantize(0, 1), 448.0f);
    EXPECT_EQ(q.dequantize(0, 2), 2.5f);
    EXPECT_EQ(q.dequantize(0, 3), 448.0f);
    EXPECT_EQ(q.overflow, 1);  // only the finite 1000
}

TEST(Quantize, PartialEdgeBlocksGetTheirOwnAmax) {
    // 2x130 under 1x128: the second block of each row holds two columns.
    std::vector<float> x(260, 1.0f);
    x[129] = 7.0f;            // row 0, edge block
    x[130 + 128] = 0.5f;      // row 1, edge block: amax 1
    const QuantizedTensor q = quantize(MatrixView{x.data(), 2, 130}, BlockScaling{Format::E4M3, 1, 128, false});
    ASSERT_EQ(q.scale_inv.size(), 4u);
    EXPECT_EQ(q.scale_inv[0], 1.0f / 448.0f);
    EXPECT_EQ(q.scale_inv[1], 1.0f / (448.0f / 7.0f));
    EXPECT_EQ(q.scale_inv[3], 1.0f / 448.0f);
}

TEST(DelayedState, HistoryMaxWithMargin) {
    DelayedState st(DelayedScaling{Format::E4M3, 3, AmaxAlgo::Max, 1});
    EXPECT_EQ(st.scale(), 1.0f);  // first step
    st.push(2.0f);
    EXPECT_EQ(st.scale(), 112.0f);  // 448 / 2 / 2
    st.push(8.0f);
    EXPECT_EQ(st.scale(), 28.0f);
    st.push(0.0f);
    EXPECT_EQ(st.scale(), 28.0f);  // max of {2, 8, 0}
    st.push(1.0f);
    EXPECT_EQ(st.scale(), 28.0f);  // {8, 0, 1}
    st.push(1.0f);
    EXPECT_EQ(st.scale(), 224.0f);  // {0, 1, 1}: the 8 left the window
    ASSERT_EQ(st.history().size(), 3u);
    EXPECT_EQ(st.history().front(), 0.0f);
    st.push(std::numeric_limits<float>::infinity());
    EXPECT_EQ(st.scale(), 224.0f);  // Inf reference: previous scale kept
}

TEST(DelayedState, MostRecentKeepsScaleOnBadAmax) {
    DelayedState st(DelayedScaling{Format::E4M3, 1024, AmaxAlgo::MostRecent, 0});
    st.push(4.0f);
    EXPECT_EQ(st.scale(), 112.0f);
    st.push(0.0f);
    EXPECT_EQ(st.scale(), 112.0f);
    st.push(std::numeric_limits<float>::quiet_NaN());
    EXPECT_EQ(st.scale(), 112.0f);
    st.push(7.0f);
    EXPECT_EQ(st.scale(), 64.0f);
    st.push(1e-45f);
    EXPECT_EQ(st.scale(), FLT_MAX);  // clamped
    EXPECT_EQ(st.history().size(), 5u);
}

// quantize() with a state uses its scale, then pushes the tensor's amax; the reference
// history follows the same steps.
TEST(DelayedState, QuantizeStepsAgreeWithReference) {
    const DelayedScaling recipe{Format::E4M3, 2, AmaxAlgo::Max, 0};
    DelayedState st(recipe);
    ref::Delayed rs{recipe, {}, 1.0f};
    for (unsigned step = 0; step < 5; ++step) {
        std::vector<float> x = ref::make_data(DataKind::Gaussian, 17, 33, step);
        for (float& v : x) v *= static_cast<float>(1 << (3 * step));  // growing amax: overflow under the old scale
        const MatrixView v{x.data(), 17, 33};
        const ref::Quantized want = ref::quantize(v, recipe, rs.scale);
        const QuantizedTensor q = quantize(v, recipe, &st);
        EXPECT_EQ(q.codes, want.codes) << step;
        EXPECT_EQ(q.scale_inv, want.scale_inv) << step;
        EXPECT_EQ(q.overflow, want.overflow) << step;
        float amax = 0;
        for (float e : x) amax = std::max(amax, std::fabs(e));
        rs.push(amax);
        EXPECT_EQ(st.scale(), rs.scale) << step;
    }
}

TEST(ScalingAmax, IgnoresNaNIncludesInf) {
    std::vector<float> x = {1.0f, std::numeric_limits<float>::quiet_NaN(), -3.0f};
    EXPECT_EQ(scaling_amax(MatrixView{x.data(), 1, 3}), 3.0f);
    x.push_back(-std::numeric_limits<float>::infinity());
    EXPECT_EQ(scaling_amax(MatrixView{x.data(), 1, 4}), std::numeric_limits<float>::infinity());
}

}  // namespace
}  // namespace fp8scope
