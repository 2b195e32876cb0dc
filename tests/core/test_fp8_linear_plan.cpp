// Fp8Linear under a precision plan: every GEMM must compute what the same GEMM computes in
// a layer that runs its recipe alone (those layers are held to an independent oracle in
// test_fp8_linear.cpp), bit for bit, including the delayed histories of operands whose two
// GEMMs follow different recipes; a GEMM in high precision equals the float64 GEMM of the
// unquantized operands to float32 accuracy.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>

#include "cpu/cpu_backend.h"
#include "engine/fp8_linear.h"

namespace fp8scope {
namespace {

CpuBackend& cpu() {
    static CpuBackend backend;
    return backend;
}

ActPtr act(std::vector<float>& v) { return ActPtr{reinterpret_cast<std::byte*>(v.data()), DType::F32}; }

std::vector<float> randn(std::size_t n, unsigned seed, float scale) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> d(0.0f, scale);
    std::vector<float> v(n);
    for (auto& x : v) x = d(rng);
    return v;
}

constexpr std::int64_t N = 64, K = 96, M = 160;

const std::vector<LinearInfo> kLinears = {{"blocks.0.mlp.fc1", 0, K, M}, {"blocks.1.mlp.fc1", 1, K, M}};

struct Step {
    std::vector<float> y, dx, dw;
};

// One training step of `linear` on fixed data of step `step`.
Step run(Fp8Linear& lin, int linear, int step) {
    auto X = randn(N * K, 10 + step, 1.0f + 3 * step), W = randn(M * K, 20 + step, 0.05f);
    auto dY = randn(N * M, 30 + step, 1e-3f * (1 + step));
    Step s{std::vector<float>(N * M), std::vector<float>(N * K), std::vector<float>(M * K)};
    lin.forward(linear, act(X), W.data(), nullptr, act(s.y), N, nullptr, true);
    lin.backward(linear, act(dY), act(X), W.data(), act(s.dx), s.dw.data(), nullptr, N, nullptr);
    lin.flush_reports();
    return s;
}

// A layer that runs one recipe on every GEMM.
Step alone(const std::string& recipe, int steps) {
    Fp8Linear lin(cpu(), kLinears);
    lin.set_recipe(training_recipe(recipe));
    Step s;
    for (int i = 0; i < steps; ++i) s = run(lin, 1, i);
    return s;
}

Step planned(const CustomRecipe& custom, int steps) {
    Fp8Linear lin(cpu(), kLinears);
    lin.set_plan(PrecisionPlan(custom, kLinears));
    Step s;
    for (int i = 0; i < steps; ++i) s = run(lin, 1, i);
    return s;
}

TEST(Fp8LinearPlan, AnOverriddenLinearRunsInHighPrecision) {
    const Step plan = planned({"c", "current", {{{"blocks.1.*"}, {}, "baseline"}}}, 1);
    const Step base = alone("baseline", 1), cur = alone("current", 1);
    EXPECT_EQ(plan.y, base.y);
    EXPECT_EQ(plan.dx, base.dx);
    EXPECT_EQ(plan.dw, base.dw);
    EXPECT_NE(plan.y, cur.y);  // the check tells the two apart
    // And high precision is the float32 GEMM: Y = X W^T against float64.
    auto X = randn(N * K, 10, 1.0f), W = randn(M * K, 20, 0.05f);
    double worst = 0;
    for (std::int64_t n = 0; n < N; ++n)
        for (std::int64_t m = 0; m < M; ++m) {
            double want = 0, bound = 0;
            for (std::int64_t k = 0; k < K; ++k) {
                want += double(X[std::size_t(n * K + k)]) * W[std::size_t(m * K + k)];
                bound += std::abs(double(X[std::size_t(n * K + k)]) * W[std::size_t(m * K + k)]);
            }
            worst = std::max(worst, std::abs(plan.y[std::size_t(n * M + m)] - want) / bound);
        }
    EXPECT_LT(worst, 2e-5);
}

TEST(Fp8LinearPlan, TheOtherLinearsKeepTheBaseRecipe) {
    const Step plan = planned({"c", "current", {{{"blocks.0.*"}, {}, "baseline"}}}, 1);
    const Step cur = alone("current", 1);
    EXPECT_EQ(plan.y, cur.y);
    EXPECT_EQ(plan.dx, cur.dx);
    EXPECT_EQ(plan.dw, cur.dw);
}

// wgrad alone in high precision: X and dY are cast apart (fprop and dgrad quantized,
// wgrad not); over three steps the delayed histories of X and dY see only the quantized
// casts, as in a run of `delayed` alone.
TEST(Fp8LinearPlan, OneGemmRoleCastsItsOperandsApart) {
    const Step plan = planned({"c", "delayed", {{{"*"}, {Gemm::Wgrad}, "baseline"}}}, 3);
    const Step del = alone("delayed", 3), base = alone("baseline", 3);
    EXPECT_EQ(plan.y, del.y);
    EXPECT_EQ(plan.dx, del.dx);
    EXPECT_EQ(plan.dw, base.dw);
    EXPECT_NE(plan.dw, del.dw);
}

// dgrad under another quantizing recipe: W and dY cast apart under two scalings.
TEST(Fp8LinearPlan, TwoQuantizingRecipesInOneLinear) {
    const Step plan = planned({"c", "current", {{{"blocks.1.mlp.fc1"}, {Gemm::Dgrad}, "mxfp8"}}}, 2);
    const Step cur = alone("current", 2), mx = alone("mxfp8", 2);
    EXPECT_EQ(plan.y, cur.y);
    EXPECT_EQ(plan.dx, mx.dx);
    EXPECT_EQ(plan.dw, cur.dw);
}

class RecipeOfCapture : public CaptureSink {
public:
    std::map<std::pair<Gemm, Operand>, std::string> seen;
    std::vector<OperandScaling> scalings;
    void on_operand(const OperandCapture& o) override {
        seen[{o.gemm, o.operand}] = o.recipe ? recipe_name(*o.recipe) : "none";
    }
    void on_scaling(const OperandScaling& s) override { scalings.push_back(s); }
    void on_op(const OpTiming&) override {}
};

TEST(Fp8LinearPlan, CaptureReportsTheQuantizerEachGemmUsed) {
    Fp8Linear lin(cpu(), kLinears);
    lin.set_plan(PrecisionPlan(CustomRecipe{"c", "current", {{{"*"}, {Gemm::Wgrad}, "baseline"}}}, kLinears));
    RecipeOfCapture sink;
    lin.set_capture(&sink, true);
    run(lin, 0, 0);
    const std::string e4m3 = recipe_name(*training_recipe("current").x);
    const std::string e5m2 = recipe_name(*training_recipe("current").dy);
    auto seen = [&](Gemm g, Operand o) { return sink.seen[std::pair(g, o)]; };
    EXPECT_EQ(seen(Gemm::Fprop, Operand::X), e4m3);
    EXPECT_EQ(seen(Gemm::Fprop, Operand::W), e4m3);
    EXPECT_EQ(seen(Gemm::Dgrad, Operand::DY), e5m2);
    EXPECT_EQ(seen(Gemm::Dgrad, Operand::W), e4m3);
    EXPECT_EQ(seen(Gemm::Wgrad, Operand::DY), "none");
    EXPECT_EQ(seen(Gemm::Wgrad, Operand::X), "none");
    // X and dY were cast for fprop and dgrad alone; W for both of its GEMMs.
    ASSERT_EQ(sink.scalings.size(), 3u);
    for (const OperandScaling& s : sink.scalings) {
        if (s.operand == Operand::W) {
            EXPECT_FALSE(s.gemm.has_value());
        } else {
            ASSERT_TRUE(s.gemm.has_value());
            EXPECT_EQ(*s.gemm, s.operand == Operand::X ? Gemm::Fprop : Gemm::Dgrad);
        }
        EXPECT_GT(s.cast.amax, 0.0f);
    }
}

TEST(Fp8LinearPlan, DelayedHistoriesPerRecipeActuallyUsed) {
    Fp8Linear lin(cpu(), kLinears);
    lin.set_plan(PrecisionPlan(CustomRecipe{"c", "current", {{{"blocks.1.*"}, {}, "delayed"}}}, kLinears));
    run(lin, 0, 0);
    run(lin, 1, 0);
    EXPECT_FALSE(lin.delayed_state(0, Operand::X).has_value());
    ASSERT_TRUE(lin.delayed_state(1, Operand::X).has_value());
    EXPECT_EQ(lin.delayed_state(1, Operand::X)->history().size(), 1u);
    // The state keeps it across a save and load.
    Fp8Linear other(cpu(), kLinears);
    other.set_plan(lin.plan());
    other.load_state(lin.save_state());
    EXPECT_EQ(other.delayed_state(1, Operand::X)->history(), lin.delayed_state(1, Operand::X)->history());
}

}  // namespace
}  // namespace fp8scope
