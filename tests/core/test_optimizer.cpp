// AdamW against a float64 reference written here from the paper's update rule, gradient
// clipping, and the warmup + cosine schedule against hand-computed values.
#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "cpu/cpu_backend.h"
#include "engine/optimizer.h"
#include "engine/rng.h"
#include "engine/schedule.h"

using namespace fp8scope;

namespace {

// Decoupled weight decay AdamW (Loshchilov & Hutter, Algorithm 2 with eta = lr), float64.
struct ReferenceAdamW {
    double b1, b2, eps, wd;
    std::vector<double> m, v;
    int t = 0;
    void step(std::vector<double>& p, const std::vector<double>& g, const std::vector<bool>& decay, double lr) {
        ++t;
        for (std::size_t i = 0; i < p.size(); ++i) {
            m[i] = b1 * m[i] + (1 - b1) * g[i];
            v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
            double mhat = m[i] / (1 - std::pow(b1, t)), vhat = v[i] / (1 - std::pow(b2, t));
            p[i] -= lr * (mhat / (std::sqrt(vhat) + eps) + (decay[i] ? wd * p[i] : 0.0));
        }
    }
};

CpuBackend& cpu() {
    static CpuBackend backend;
    return backend;
}

double grad_norm(std::vector<float>& g) { return cpu().grad_norm(g.data(), std::int64_t(g.size())); }

// Clips `g` in place as the gradients AdamW reads are clipped; returns the factor.
float clip(std::vector<float>& g, double norm, float max_norm) {
    const float f = clip_factor(norm, max_norm);
    for (float& x : g) x *= f;
    return f;
}

std::vector<ParamTensor> two_tensors(std::size_t n_matrix, std::size_t n_bias) {
    return {{"w", 0, {static_cast<std::int64_t>(n_matrix)}, true},
            {"b", n_matrix, {static_cast<std::int64_t>(n_bias)}, false}};
}

}  // namespace

TEST(AdamW, MatchesFloat64ReferenceOverManySteps) {
    const std::size_t nw = 3000, nb = 77, n = nw + nb;
    OptimizerConfig c;
    c.beta1 = 0.9f, c.beta2 = 0.95f, c.eps = 1e-8f, c.weight_decay = 0.1f;
    AdamW opt(c, two_tensors(nw, nb), n, cpu());
    ReferenceAdamW ref{c.beta1, c.beta2, c.eps, c.weight_decay, std::vector<double>(n), std::vector<double>(n)};
    Rng rng(7);
    std::vector<float> p(n);
    std::vector<double> pd(n);
    std::vector<bool> decay(n);
    for (std::size_t i = 0; i < n; ++i) {
        p[i] = static_cast<float>(rng.uniform() * 2 - 1);
        pd[i] = p[i];
        decay[i] = i < nw;
    }
    for (int s = 0; s < 50; ++s) {
        std::vector<float> g(n);
        std::vector<double> gd(n);
        for (std::size_t i = 0; i < n; ++i) {
            g[i] = static_cast<float>((rng.uniform() - 0.5) * 0.01 * (1 + i % 7));
            gd[i] = g[i];
        }
        double lr = 1e-3 * (1 + s % 5);
        opt.step(p, g, static_cast<float>(lr));
        ref.step(pd, gd, decay, static_cast<float>(lr));
    }
    EXPECT_EQ(opt.steps_taken(), 50);
    double worst = 0.0;
    for (std::size_t i = 0; i < n; ++i) worst = std::max(worst, std::abs(p[i] - pd[i]) / std::max(1e-3, std::abs(pd[i])));
    EXPECT_LT(worst, 2e-5);
    const auto m = opt.m_to_host();
    for (std::size_t i = 0; i < n; i += 97) EXPECT_NEAR(m[i], ref.m[i], 1e-7 + 1e-5 * std::abs(ref.m[i]));
}

TEST(AdamW, FirstStepMovesEveryWeightByLrTowardsMinusSignOfGradient) {
    // After one step m_hat = g and v_hat = g^2, so the update is lr * g / (|g| + eps).
    OptimizerConfig c;
    c.weight_decay = 0.0f;
    AdamW opt(c, two_tensors(2, 2), 4, cpu());
    std::vector<float> p = {1.0f, 1.0f, 1.0f, 1.0f}, g = {0.5f, -2.0f, 1e-3f, -4.0f};
    opt.step(p, g, 0.01f);
    EXPECT_NEAR(p[0], 0.99f, 1e-6);
    EXPECT_NEAR(p[1], 1.01f, 1e-6);
    EXPECT_NEAR(p[2], 0.99f, 1e-6);
    EXPECT_NEAR(p[3], 1.01f, 1e-6);
}

TEST(AdamW, WeightDecayIsDecoupledAndOnlyOnDecayParameters) {
    // Zero gradients: the Adam part is 0, so a decay weight p becomes p - lr * wd * p
    // (2 - 0.1 * 0.5 * 2 = 1.9) and a bias does not move at all.
    OptimizerConfig c;
    c.weight_decay = 0.5f;
    AdamW opt(c, two_tensors(1, 1), 2, cpu());
    std::vector<float> p = {2.0f, 2.0f}, g = {0.0f, 0.0f};
    opt.step(p, g, 0.1f);
    EXPECT_FLOAT_EQ(p[0], 1.9f);
    EXPECT_EQ(p[1], 2.0f);
}

// Decay applies inside the runs and nowhere else: with zero gradients the Adam part is 0,
// so exactly the elements of the runs move, by lr * wd * p (2 - 0.1 * 0.5 * 2 = 1.9). The
// runs cut the parallel loop's chunks (1 << 14 elements) anywhere, in runs of one element
// too, on 4 threads.
TEST(AdamW, DecaysExactlyInsideTheRuns) {
    AdamWParams a;
    a.lr = 0.1f, a.weight_decay = 0.5f;
    a.bias_correction1 = 1 - a.beta1, a.bias_correction2 = 1 - a.beta2;
    const std::int64_t n = 70001;
    const std::vector<std::vector<DecayRun>> cases = {
        {}, {{0, n}}, {{0, 1}}, {{n - 1, n}}, {{5, 16384}, {16384, 16385}, {16390, 40000}, {65535, 65537}, {69999, n}}};
    CpuBackend four(4);
    for (const auto& runs : cases) {
        std::vector<float> p(n, 2.0f), g(n, 0.0f), m(n, 0.0f), v(n, 0.0f);
        four.adamw(p.data(), g.data(), m.data(), v.data(), runs, n, a);
        std::vector<bool> in(n, false);
        for (const DecayRun& r : runs)
            for (std::int64_t i = r.begin; i < r.end; ++i) in[std::size_t(i)] = true;
        std::int64_t wrong = 0;
        for (std::int64_t i = 0; i < n; ++i) wrong += p[std::size_t(i)] != (in[std::size_t(i)] ? 1.9f : 2.0f);
        EXPECT_EQ(wrong, 0) << runs.size() << " runs";
    }
}

// Runs that are empty, overlap, come out of order or leave [0, n) are refused by name.
TEST(AdamW, RefusesBadDecayRuns) {
    std::vector<float> p(10), g(10), m(10), v(10);
    for (const std::vector<DecayRun>& runs : std::vector<std::vector<DecayRun>>{
             {{3, 3}}, {{0, 5}, {4, 8}}, {{6, 8}, {0, 2}}, {{-1, 2}}, {{8, 11}}}) {
        try {
            cpu().adamw(p.data(), g.data(), m.data(), v.data(), runs, 10, AdamWParams{});
            ADD_FAILURE() << "accepted run [" << runs.back().begin << ", " << runs.back().end << ")";
        } catch (const std::invalid_argument& e) {
            EXPECT_NE(std::string(e.what()).find("decay run"), std::string::npos) << e.what();
        }
    }
}

// The optimizer merges its decaying tensors into runs: touching and overlapping tensors
// make one run, a tensor without decay between two leaves a gap (checked through the
// update: zero gradients, so only decay moves a weight).
TEST(AdamW, DecayRunsAreTheUnionOfTheDecayingTensors) {
    OptimizerConfig c;
    c.weight_decay = 0.5f;
    const std::vector<ParamTensor> tensors = {{"b", 4, {2}, false}, {"w1", 0, {4}, true}, {"w2", 6, {3}, true},
                                              {"w3", 8, {2}, true}, {"n", 10, {2}, false}};
    AdamW opt(c, tensors, 12, cpu());
    std::vector<float> p(12, 2.0f), g(12, 0.0f);
    opt.step(p, g, 0.1f);
    for (int i = 0; i < 12; ++i) EXPECT_FLOAT_EQ(p[std::size_t(i)], (i < 4 || (i >= 6 && i < 10)) ? 1.9f : 2.0f) << i;
}

TEST(AdamW, RejectsMismatchedSizes) {
    AdamW opt(OptimizerConfig{}, two_tensors(3, 1), 4, cpu());
    std::vector<float> p(4), g(5);
    EXPECT_THROW(opt.step(p, g, 0.1f), std::invalid_argument);
    EXPECT_THROW(AdamW(OptimizerConfig{}, two_tensors(3, 2), 4, cpu()), std::invalid_argument);
}

TEST(GradNorm, MatchesFloat64AndIsTheSameForAnyThreadCount) {
    std::vector<float> g(100003);
    Rng rng(3);
    double ref = 0.0;
    for (auto& x : g) {
        x = static_cast<float>(rng.uniform() - 0.5);
        ref += double(x) * x;
    }
    auto norm_with = [&](int threads) {
        CpuBackend backend(threads);
        return backend.grad_norm(g.data(), std::int64_t(g.size()));
    };
    double one = norm_with(1), two = norm_with(2), three = norm_with(3);
    CpuBackend restore_default;
    EXPECT_NEAR(one, std::sqrt(ref), 1e-9 * std::sqrt(ref));
    EXPECT_EQ(one, two);
    EXPECT_EQ(one, three);
}

TEST(GradNorm, ClippingScalesToTheMaximumAndLeavesSmallGradientsAlone) {
    std::vector<float> g = {3.0f, 4.0f};  // norm 5
    EXPECT_EQ(clip(g, grad_norm(g), 10.0f), 1.0f);
    EXPECT_EQ(g[0], 3.0f);
    clip(g, grad_norm(g), 1.0f);
    EXPECT_NEAR(g[0], 0.6f, 1e-6);
    EXPECT_NEAR(g[1], 0.8f, 1e-6);
    EXPECT_NEAR(grad_norm(g), 1.0, 1e-6);
}

TEST(AdamW, TheClipFactorAppliedInTheUpdateEqualsClippedGradientsBitForBit) {
    const std::size_t n = 1037;
    OptimizerConfig c;
    c.weight_decay = 0.1f;
    AdamW fused(c, two_tensors(1000, 37), n, cpu()), apart(c, two_tensors(1000, 37), n, cpu());
    Rng rng(3);
    std::vector<float> p(n), q(n);
    for (std::size_t i = 0; i < n; ++i) p[i] = q[i] = static_cast<float>(rng.uniform() - 0.5);
    for (int s = 0; s < 5; ++s) {
        std::vector<float> g(n);
        for (float& x : g) x = static_cast<float>(rng.uniform() - 0.5);
        const float f = clip_factor(grad_norm(g), 1.0f);
        ASSERT_LT(f, 1.0f);  // ~9 over 1.0: clipping is on
        fused.step(p, g, 1e-2f, f);
        for (float& x : g) x *= f;
        apart.step(q, g, 1e-2f);
    }
    EXPECT_EQ(p, q);
}

TEST(Schedule, WarmupIsLinearFromLrOverWarmup) {
    CosineSchedule s{1.0f, 0.1f, 10, 111};
    EXPECT_FLOAT_EQ(s.at(0), 0.1f);
    EXPECT_FLOAT_EQ(s.at(4), 0.5f);
    EXPECT_FLOAT_EQ(s.at(9), 1.0f);
}

TEST(Schedule, CosineReachesHandComputedValuesAndEndsAtMinLr) {
    CosineSchedule s{1.0f, 0.1f, 10, 111};  // 100 decay steps: 10 .. 110
    EXPECT_FLOAT_EQ(s.at(10), 1.0f);
    EXPECT_FLOAT_EQ(s.at(60), 0.55f);             // half way: 0.1 + 0.9 * 0.5
    EXPECT_NEAR(s.at(35), 0.868198052f, 1e-7);    // 0.1 + 0.9 * (1 + cos(pi/4)) / 2
    EXPECT_NEAR(s.at(85), 0.231801948f, 1e-7);    // 0.1 + 0.9 * (1 - cos(pi/4)) / 2
    EXPECT_FLOAT_EQ(s.at(110), 0.1f);
    EXPECT_FLOAT_EQ(s.at(500), 0.1f);
}

TEST(Schedule, NoWarmupStartsAtPeak) {
    CosineSchedule s{3e-3f, 3e-4f, 0, 11};
    EXPECT_FLOAT_EQ(s.at(0), 3e-3f);
    EXPECT_FLOAT_EQ(s.at(5), 1.65e-3f);
    EXPECT_FLOAT_EQ(s.at(10), 3e-4f);
}
