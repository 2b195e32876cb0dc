// The rules FP4 training adds to the cast (cast_rules.h): Philox4x32-10 against Random123's
// known-answer vectors, stochastic rounding of E2M1 (every grid interval, unbiased, the
// clamp, signs), and the random Hadamard transform against a float64 matrix product
// (orthogonal: H H^T = 16 I, TE's sign vector, a GEMM through it unchanged).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "fp8/cast_rules.h"

namespace fp8scope {
namespace {

TEST(Philox, MatchesRandom123KnownAnswers) {
    struct Case {
        std::uint32_t c[4], k[2], want[4];
    };
    const Case cases[] = {
        {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
        {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
         {0xffffffff, 0xffffffff},
         {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
        {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
         {0xa4093822, 0x299f31d0},
         {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
    };
    for (const Case& t : cases) {
        const cast::Philox4 r = cast::philox4x32_10(t.c[0], t.c[1], t.c[2], t.c[3], t.k[0], t.k[1]);
        for (int i = 0; i < 4; ++i) EXPECT_EQ(r.v[i], t.want[i]) << "word " << i;
    }
}

TEST(Philox, RoundingBitsTakeEveryInputIntoAccount) {
    const cast::RoundingKey k{7, 3, 5};
    const std::uint32_t base = cast::rounding_bits(k, 10);
    EXPECT_EQ(cast::rounding_bits(k, 10), base);  // a pure function
    EXPECT_NE(cast::rounding_bits({8, 3, 5}, 10), base);
    EXPECT_NE(cast::rounding_bits({7, 4, 5}, 10), base);
    EXPECT_NE(cast::rounding_bits({7, 3, 6}, 10), base);
    EXPECT_NE(cast::rounding_bits({7, 3, 5}, 11), base);
    EXPECT_NE(cast::rounding_bits({7, 3ull << 32, 5}, 10), base);  // the step's high word
    // Element e is word e % 4 of the counter e / 4.
    const cast::Philox4 r = cast::philox4x32_10(2, 5, 3, 0, 7, 0);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(cast::rounding_bits(k, 8 + i), r.v[i]);
}

const float kGrid[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};

TEST(StochasticRounding, RoundsToANeighbourWithTheRightProbability) {
    for (int lo = 0; lo < 7; ++lo) {
        const float a = kGrid[lo], b = kGrid[lo + 1];
        for (const double f : {0.0, 0.125, 0.25, 0.5, 0.75, 0.9375}) {
            const float y = float(a + f * (b - a));
            for (const float sign : {1.0f, -1.0f}) {
                // u >> 8 below f * 2^24 rounds up: the first 2^24 f values of 2^24 go up.
                const std::uint32_t edge = std::uint32_t(f * 16777216.0) << 8;
                std::uint32_t clamped = 9;
                const std::uint8_t down = cast::e2m1_code_sr(sign * y, edge, clamped);
                EXPECT_EQ(clamped, 0u);
                EXPECT_EQ(cast::e2m1_value(down), sign * a) << y << " u=" << edge;
                if (f > 0) {
                    const std::uint8_t up = cast::e2m1_code_sr(sign * y, edge - 256, clamped);
                    EXPECT_EQ(cast::e2m1_value(up), sign * b) << y;
                    EXPECT_EQ(cast::e2m1_value(cast::e2m1_code_sr(sign * y, 0, clamped)), sign * b);
                }
                EXPECT_EQ(cast::e2m1_value(cast::e2m1_code_sr(sign * y, 0xFFFFFFFFu, clamped)), sign * a) << y;
            }
        }
    }
    std::uint32_t clamped = 0;
    EXPECT_EQ(cast::e2m1_code_sr(6.0f, 0, clamped), 7);
    EXPECT_EQ(clamped, 0u);
    EXPECT_EQ(cast::e2m1_code_sr(-7.5f, 0, clamped), 0xF);  // clamped to -6, never past it
    EXPECT_EQ(clamped, 1u);
    EXPECT_EQ(cast::e2m1_code_sr(INFINITY, 0, clamped), 7);
    EXPECT_EQ(clamped, 1u);
    EXPECT_EQ(cast::e2m1_code_sr(-0.0f, 0, clamped), 0x8);
}

TEST(StochasticRounding, IsUnbiased) {
    // The mean of many draws of Philox bits converges to y (standard error below 1e-3 step).
    for (const float y : {0.1f, 0.3f, 0.74f, 1.2f, 1.9f, 2.3f, 3.7f, 4.5f, 5.99f, -2.6f}) {
        double sum = 0;
        const int n = 400000;
        std::uint32_t clamped;
        for (int i = 0; i < n; ++i)
            sum += cast::e2m1_value(cast::e2m1_code_sr(y, cast::rounding_bits({1, 2, 3}, std::uint64_t(i)), clamped));
        const double step = std::fabs(y) < 2 ? 0.5 : std::fabs(y) < 4 ? 1.0 : 2.0;
        EXPECT_NEAR(sum / n, y, 4e-3 * step) << y;
    }
}

// Sylvester H (natural order): H_ij = (-1)^popcount(i & j).
double hadamard(int i, int j) { return __builtin_popcount(unsigned(i & j)) % 2 ? -1.0 : 1.0; }

TEST(RandomHadamard, IsTheSignedSylvesterMatrixOverFour) {
    const int signs[16] = {1, 1, 1, -1, 1, -1, -1, -1, -1, -1, -1, 1, -1, 1, -1, -1};  // TE's wgrad vector
    for (int i = 0; i < 16; ++i) {
        double dot = 0;
        for (int j = 0; j < 16; ++j) dot += hadamard(i, j) * hadamard(3, j);
        EXPECT_EQ(dot, i == 3 ? 16.0 : 0.0);  // H H^T = 16 I
    }
    std::mt19937 gen(5);
    std::normal_distribution<float> normal(0.0f, 3.0f);
    for (int trial = 0; trial < 50; ++trial) {
        float v[16];
        double want[16] = {}, norm_in = 0, norm_out = 0;
        for (float& x : v) x = normal(gen);
        for (int j = 0; j < 16; ++j)
            for (int i = 0; i < 16; ++i) want[j] += double(v[i]) * signs[i] * hadamard(i, j) / 4.0;  // v D H / 4
        for (float x : v) norm_in += double(x) * x;
        cast::rht16(v);
        for (int j = 0; j < 16; ++j) {
            EXPECT_NEAR(v[j], want[j], 1e-5 * (1 + std::fabs(want[j])));
            norm_out += double(v[j]) * v[j];
        }
        EXPECT_NEAR(norm_out, norm_in, 1e-5 * norm_in);  // orthogonal
    }
}

// rht16_times4 and rht16_times4_abs_max (the CUDA cast's and amax pass's forms) against
// rht16 on BF16 input: every bit pattern class, the subnormal range (where a quarter of a
// float32 could round) and magnitudes whose sums overflow to Inf, then Inf - Inf = NaN.
TEST(RandomHadamard, TimesFourFormsMatchRht16BitForBitOnBf16Input) {
    std::mt19937 gen(17);
    std::uniform_int_distribution<std::uint32_t> bits(0, 0xFFFF), tiny(0, 0x03FF), sign(0, 1);
    auto bf16 = [](std::uint32_t b) { return cast::float_of(b << 16); };
    for (int trial = 0; trial < 200000; ++trial) {
        float v[16];
        const int kind = trial % 4;
        for (float& x : v) {
            if (kind == 0) x = bf16(bits(gen));                          // any pattern, NaN included
            else if (kind == 1) x = bf16(tiny(gen) | sign(gen) << 15);   // subnormal and tiny normal
            else if (kind == 2) x = bf16((0x7F00 + bits(gen) % 0x80) | sign(gen) << 15);  // near FLT_MAX
            else x = bf16((0x3C00 + bits(gen) % 0x600) | sign(gen) << 15);  // ordinary magnitudes
        }
        float want[16], got[16], m[16];
        std::copy(v, v + 16, want);
        std::copy(v, v + 16, got);
        std::copy(v, v + 16, m);
        cast::rht16(want);
        cast::rht16_times4(got);
        float want_max = 0.0f;
        for (int j = 0; j < 16; ++j) {
            const float q = got[j] * 0.25f;
            if (std::isnan(want[j])) {
                EXPECT_TRUE(std::isnan(q)) << trial << " " << j;
            } else {
                ASSERT_EQ(cast::bits_of(q), cast::bits_of(want[j])) << "trial " << trial << " element " << j;
                want_max = std::max(want_max, std::fabs(want[j]));
            }
        }
        ASSERT_EQ(cast::bits_of(cast::rht16_times4_abs_max(m) * 0.25f), cast::bits_of(want_max)) << "trial " << trial;
    }
}

TEST(RandomHadamard, AGemmWhoseOperandsBothTakeItAlongKIsUnchanged) {
    // dW = dY^T X with both operands transformed along N (the wgrad GEMM's K).
    const int M = 5, K = 7, N = 48;
    std::mt19937 gen(11);
    std::normal_distribution<float> normal;
    std::vector<float> dyt(M * N), xt(K * N);  // rows along N
    for (float& v : dyt) v = normal(gen);
    for (float& v : xt) v = normal(gen);
    auto gemm = [&](const std::vector<float>& a, const std::vector<float>& b, int m, int n) {
        double s = 0;
        for (int k = 0; k < N; ++k) s += double(a[m * N + k]) * b[n * N + k];
        return s;
    };
    std::vector<float> dyt_h = dyt, xt_h = xt;
    for (int r = 0; r < M; ++r)
        for (int b = 0; b < N; b += 16) cast::rht16(&dyt_h[r * N + b]);
    for (int r = 0; r < K; ++r)
        for (int b = 0; b < N; b += 16) cast::rht16(&xt_h[r * N + b]);
    for (int m = 0; m < M; ++m)
        for (int n = 0; n < K; ++n) EXPECT_NEAR(gemm(dyt_h, xt_h, m, n), gemm(dyt, xt, m, n), 1e-4 * std::sqrt(N));
}

}  // namespace
}  // namespace fp8scope
