// The gate/up alignment of a SwiGLU's fc1 weight: hand-checked rows (exact cosines), and
// random weights with planted aligned channels against a float64 oracle written out here
// (each cosine from the law of cosines, ||g - u||^2 = ||g||^2 + ||u||^2 - 2 g.u, the
// percentile from a full sort).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "stats/gate_up_alignment.h"

using namespace fp8scope::stats;

TEST(GateUpAlignment, HandBuiltRows) {
    // H = 4 channels of C = 3: gate rows 0..3, up rows 4..7.
    const std::vector<float> w = {
        1, 0, 0,  // gate 0
        0, 1, 0,  // gate 1
        1, 0, 0,  // gate 2
        1, 0, 0,  // gate 3
        2, 0, 0,  // up 0: cos 1, norms 2
        0, -3, 0, // up 1: cos -1, norms 3
        0, 0, 5,  // up 2: cos 0, norms 5
        6, 8, 0,  // up 3: cos 0.6 (a 6-8-10 triangle), norms 10: |cos| x norms 6, the largest
    };
    const GateUpAlignment a = gate_up_alignment(w.data(), 4, 3);
    EXPECT_EQ(a.channels, 4);
    EXPECT_DOUBLE_EQ(a.mean_abs_cos, (1 + 1 + 0 + 0.6) / 4);
    EXPECT_DOUBLE_EQ(a.max_abs_cos, 1);
    EXPECT_DOUBLE_EQ(a.p99_abs_cos, 1);  // rank ceil(3.96) = 4 of 4
    EXPECT_EQ(a.aligned, 2);             // channels 0 and 1 (|cos| 1 > 0.9); 0.6 is not
    EXPECT_EQ(a.top_channel, 3);         // not the most aligned channel: the largest product
    EXPECT_DOUBLE_EQ(a.top_cos, 0.6);
    EXPECT_DOUBLE_EQ(a.top_norm_product, 10);
}

TEST(GateUpAlignment, AntiAlignedChannelLeadsWithItsSign) {
    // Channel 1's rows are opposite and long: the top channel, cos -1.
    const std::vector<float> v = {
        1, 0,   // gate 0
        0, 4,   // gate 1
        0, 1,   // up 0: cos 0
        0, -4,  // up 1: cos -1, norms 16
    };
    const GateUpAlignment a = gate_up_alignment(v.data(), 2, 2);
    EXPECT_EQ(a.top_channel, 1);
    EXPECT_DOUBLE_EQ(a.top_cos, -1);
    EXPECT_DOUBLE_EQ(a.top_norm_product, 16);
    EXPECT_EQ(a.aligned, 1);
    EXPECT_DOUBLE_EQ(a.mean_abs_cos, 0.5);
}

TEST(GateUpAlignment, ZeroRowHasCosineZero) {
    const std::vector<float> v = {0, 0, 1, 1, 3, 3, 2, 2};  // gate 0 is zero; channel 1: cos 1
    const GateUpAlignment a = gate_up_alignment(v.data(), 2, 2);
    EXPECT_DOUBLE_EQ(a.mean_abs_cos, 0.5);
    EXPECT_EQ(a.top_channel, 1);
    EXPECT_DOUBLE_EQ(a.top_norm_product, 4);  // sqrt(2) * sqrt(8)
}

TEST(GateUpAlignment, MatchesFloat64OracleOnRandomWeights) {
    const std::int64_t H = 1000, C = 96;
    std::mt19937 gen(7);
    std::normal_distribution<float> n(0.0f, 0.05f);
    std::vector<float> w(std::size_t(2 * H * C));
    for (float& x : w) x = n(gen);
    // Channels 17, 400 and 999: the up row pulled towards the gate row (or away from it),
    // channel 400 also scaled up.
    const struct { std::int64_t j; float mix, scale; } planted[] = {{17, 0.95f, 1}, {400, -0.8f, 3}, {999, 0.5f, 1}};
    for (const auto& p : planted)
        for (std::int64_t k = 0; k < C; ++k) {
            float& u = w[std::size_t((H + p.j) * C + k)];
            u = p.scale * (p.mix * w[std::size_t(p.j * C + k)] + (1 - std::fabs(p.mix)) * u);
        }
    const GateUpAlignment a = gate_up_alignment(w.data(), H, C);

    std::vector<double> abs_cos;
    double sum = 0, best = -1, best_cos = 0, best_norms = 0;
    std::int64_t aligned = 0, best_j = -1;
    for (std::int64_t j = 0; j < H; ++j) {
        long double gg = 0, uu = 0, dd = 0;
        for (std::int64_t k = 0; k < C; ++k) {
            const long double g = w[std::size_t(j * C + k)], u = w[std::size_t((H + j) * C + k)];
            gg += g * g, uu += u * u, dd += (g - u) * (g - u);
        }
        const double norms = double(std::sqrt(gg) * std::sqrt(uu));
        const double c = double((gg + uu - dd) / 2 / (std::sqrt(gg) * std::sqrt(uu)));
        abs_cos.push_back(std::fabs(c));
        sum += std::fabs(c);
        aligned += std::fabs(c) > 0.9;
        if (std::fabs(c) * norms > best) best = std::fabs(c) * norms, best_j = j, best_cos = c, best_norms = norms;
    }
    std::sort(abs_cos.begin(), abs_cos.end());
    EXPECT_NEAR(a.mean_abs_cos, sum / double(H), 1e-12);
    EXPECT_NEAR(a.max_abs_cos, abs_cos.back(), 1e-12);
    EXPECT_NEAR(a.p99_abs_cos, abs_cos[989], 1e-12);  // rank 990 of 1000
    EXPECT_EQ(a.aligned, aligned);
    EXPECT_EQ(a.aligned, 2);  // channels 17 (|cos| ~0.999) and 400 (~0.97); 999 (~0.71) is not
    EXPECT_EQ(a.top_channel, best_j);
    EXPECT_EQ(a.top_channel, 400);  // three times the norm
    EXPECT_NEAR(a.top_cos, best_cos, 1e-12);
    EXPECT_LT(a.top_cos, 0);
    EXPECT_NEAR(a.top_norm_product, best_norms, 1e-12 * best_norms);
    // Random rows in 96 dimensions: |cos| ~ 0.08 on average.
    EXPECT_LT(a.mean_abs_cos, 0.1);
}
