// The quantized linear layer against the test's own oracle: every operand quantized by
// quantize() + dequantize() in its GEMM orientation (the test transposes explicitly, so
// the layer's "columnwise = transposed rowwise" shortcut is checked too), then a float64
// GEMM. Delayed scaling is mirrored by the test's own DelayedState objects. Shapes are
// multiples of 32 (MX blocks) but not of 128, so blockwise edge blocks are partial.
//
// Power-of-two block scales make a cast orientation-blind except where a block's amax
// pushes small elements into subnormals. So the operands have rows that alternate
// between 1 and 2^-18, with the other operand of each GEMM carrying the inverse factor:
// every product then matters, and the crushed rows of a wrongly oriented cast change
// the result by O(1). Results are compared per element against the float32 GEMM error
// bound (|a| |b| summed), since their magnitudes span 2^36.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>

#include "cpu/cpu_backend.h"
#include "cpu/quantize.h"
#include "engine/fp8_linear.h"
#include "support/linear_oracle.h"

namespace fp8scope {
namespace {

using namespace testing;

CpuBackend& cpu() {
    static CpuBackend backend;
    return backend;
}

// max over elements of |got - want| / sum_p |a_ip| |b_jp|, for c = a b^T (a: m x k, b: n x k)
double bound_error(const std::vector<float>& got, const Vec& want, const std::vector<float>& a,
                   const std::vector<float>& b, std::int64_t m, std::int64_t n, std::int64_t k) {
    std::vector<float> aa(a), bb(b);
    for (auto& v : aa) v = std::abs(v);
    for (auto& v : bb) v = std::abs(v);
    Vec bound = gemm_nt(aa, bb, m, n, k);
    double worst = 0;
    for (std::size_t i = 0; i < want.size(); ++i)
        if (bound[i] > 0) worst = std::max(worst, std::abs(got[i] - want[i]) / bound[i]);
    return worst;
}

// float32 accumulation over k <= 160 terms stays below 160 * 2^-24 ~ 1e-5 of the bound.
constexpr double kGemmTol = 2e-5;

// scale_odd_rows' counterpart for columns.
void scale_odd_cols(std::vector<float>& m, std::int64_t cols, bool inverse) {
    const float f = std::ldexp(1.0f, inverse ? 18 : -18);
    for (std::size_t i = 0; i < m.size(); ++i)
        if ((std::int64_t(i) % cols) % 2 == 1) m[i] *= f;
}

struct Captured {
    Gemm gemm;
    Operand operand;
    std::int64_t rows, cols;
    std::vector<float> values;
    bool has_recipe, has_delayed;
    float delayed_scale;
    std::size_t history;
};

class RecordingSink : public CaptureSink {
public:
    std::vector<Captured> operands;
    std::vector<std::string> ops;
    bool ordered = true;  // every timing has start <= end
    void on_operand(const OperandCapture& o) override {
        // A transposed repeat is a view of the stored matrix: read it in its own layout.
        const float* d = static_cast<const float*>(o.values.data);
        std::vector<float> v(d, d + o.values.numel());
        if (o.values.transposed) v = transposed(v, o.values.cols, o.values.rows);
        operands.push_back({o.gemm, o.operand, o.values.rows, o.values.cols, std::move(v), o.recipe != nullptr,
                            o.delayed != nullptr, o.delayed ? o.delayed->scale() : 0.0f,
                            o.delayed ? o.delayed->history().size() : 0});
    }
    void on_op(const OpTiming& t) override {
        ops.emplace_back(t.op);
        ordered = ordered && t.start_ns <= t.end_ns;
    }
};

std::optional<DelayedState> delayed_for(const std::optional<Recipe>& r) {
    if (r)
        if (const auto* d = std::get_if<DelayedScaling>(&*r)) return DelayedState(*d);
    return std::nullopt;
}

DelayedState* ptr(std::optional<DelayedState>& s) { return s ? &*s : nullptr; }

constexpr std::int64_t N = 64, K = 96, M = 160;

class Fp8LinearRecipe : public ::testing::TestWithParam<std::string> {};

TEST_P(Fp8LinearRecipe, GemmsSeeTheQuantizedOperandsOfTheirOrientation) {
    const TrainingRecipe recipe = training_recipe(GetParam());
    Fp8Linear lin(cpu(), {LinearInfo{"blocks.0.attn.proj", 0, K, M}});
    lin.set_recipe(recipe);
    RecordingSink sink;
    lin.set_capture(&sink, true);
    auto sx = delayed_for(recipe.x), sw = delayed_for(recipe.w), sdy = delayed_for(recipe.dy);

    for (int step = 0; step < 3; ++step) {  // the amax grows, so delayed scales move
        auto X = randn(N * K, 10 + step, 1.0f + 2 * step), W = randn(M * K, 20 + step, 0.05f);
        auto dY = randn(N * M, 40 + step, 1e-3f * (step + 1));
        scale_odd_rows(X, K, false);  // X rows n: f_n
        scale_odd_rows(W, K, false);  // W rows m: g_m
        scale_odd_rows(dY, M, true);  // dY: 1 / (f_n g_m)
        scale_odd_cols(dY, M, true);
        std::vector<float> Y(N * M), dX(N * K), dW(M * K), db(M);
        sink.operands.clear();
        lin.forward(0, act(X), W.data(), nullptr, act(Y), N, nullptr, true);
        auto cx = sx, cw = sw;  // states as the forward cast saw them
        auto Xq = fake_q(X, N, K, recipe.x, ptr(sx)), Wq = fake_q(W, M, K, recipe.w, ptr(sw));
        EXPECT_LT(bound_error(Y, gemm_nt(Xq, Wq, N, M, K), Xq, Wq, N, M, K), kGemmTol) << "fprop step " << step;
        if (recipe.quantized()) {  // and the check can tell quantized from float32
            EXPECT_GT(bound_error(Y, gemm_nt(X, W, N, M, K), X, W, N, M, K), 1e-3) << "fprop step " << step;
        }

        lin.backward(0, act(dY), act(X), W.data(), act(dX), dW.data(), db.data(), N, nullptr);
        lin.flush_reports();
        auto cdy = sdy;
        auto dYq = fake_q(dY, N, M, recipe.dy, ptr(sdy));
        auto cw2 = cw;
        auto Wtq = fake_q(transposed(W, M, K), K, M, recipe.w, ptr(cw2));
        EXPECT_LT(bound_error(dX, gemm_nt(dYq, Wtq, N, K, M), dYq, Wtq, N, K, M), kGemmTol) << "dgrad step " << step;
        auto cdy2 = cdy, cx2 = cx;
        auto dYtq = fake_q(transposed(dY, N, M), M, N, recipe.dy, ptr(cdy2));
        auto Xtq = fake_q(transposed(X, N, K), K, N, recipe.x, ptr(cx2));
        EXPECT_LT(bound_error(dW, gemm_nt(dYtq, Xtq, M, K, N), dYtq, Xtq, M, K, N), kGemmTol) << "wgrad step " << step;
        // Six operands, each in its GEMM's orientation (contraction dimension last).
        struct Want {
            Gemm g;
            Operand o;
            std::int64_t rows, cols;
            std::vector<float> values;
            const std::optional<DelayedState>* state;
        };
        const Want want[] = {
            {Gemm::Fprop, Operand::X, N, K, X, &cx},
            {Gemm::Fprop, Operand::W, M, K, W, &cw},
            {Gemm::Dgrad, Operand::DY, N, M, dY, &cdy},
            {Gemm::Dgrad, Operand::W, K, M, transposed(W, M, K), &cw},
            {Gemm::Wgrad, Operand::DY, M, N, transposed(dY, N, M), &cdy},
            {Gemm::Wgrad, Operand::X, K, N, transposed(X, N, K), &cx},
        };
        ASSERT_EQ(sink.operands.size(), 6u);
        for (const Want& w : want) {
            auto it = std::find_if(sink.operands.begin(), sink.operands.end(),
                                   [&](const Captured& c) { return c.gemm == w.g && c.operand == w.o; });
            ASSERT_NE(it, sink.operands.end()) << gemm_name(w.g) << " " << operand_name(w.o);
            EXPECT_EQ(it->rows, w.rows);
            EXPECT_EQ(it->cols, w.cols);
            EXPECT_EQ(it->values, w.values) << gemm_name(w.g) << " " << operand_name(w.o);
            EXPECT_EQ(it->has_recipe, recipe.operand(w.o).has_value());
            ASSERT_EQ(it->has_delayed, w.state->has_value());
            if (it->has_delayed) {
                EXPECT_EQ(it->delayed_scale, (*w.state)->scale());
                EXPECT_EQ(it->history, std::size_t(step));
            }
        }
    }
    EXPECT_TRUE(sink.ordered);
    for (const char* op : {"fprop", "dgrad", "wgrad"})
        EXPECT_NE(std::find(sink.ops.begin(), sink.ops.end(), op), sink.ops.end()) << op;
    EXPECT_EQ(std::find(sink.ops.begin(), sink.ops.end(), "quantize") != sink.ops.end(), recipe.quantized());
}

INSTANTIATE_TEST_SUITE_P(Recipes, Fp8LinearRecipe,
                         ::testing::Values("baseline", "delayed", "delayed_e4m3", "current", "blockwise", "mxfp8"));

TEST(Fp8Linear, BiasAndItsGradientStayFloat32) {
    Fp8Linear lin(cpu(), {LinearInfo{"l", 0, K, M}});
    lin.set_recipe(training_recipe("current"));
    auto X = randn(N * K, 1), W = randn(M * K, 2), b = randn(M, 3), dY = randn(N * M, 4);
    std::vector<float> Y(N * M), Yb(N * M), dX(N * K), dW(M * K), db(M);
    lin.forward(0, act(X), W.data(), nullptr, act(Y), N, nullptr, true);
    lin.forward(0, act(X), W.data(), b.data(), act(Yb), N, nullptr, true);
    for (std::int64_t i = 0; i < N * M; ++i) ASSERT_EQ(Yb[std::size_t(i)], Y[std::size_t(i)] + b[std::size_t(i % M)]);
    lin.backward(0, act(dY), act(X), W.data(), act(dX), dW.data(), db.data(), N, nullptr);
    lin.flush_reports();
    Vec dbref(M, 0.0);
    for (std::int64_t i = 0; i < N * M; ++i) dbref[std::size_t(i % M)] += dY[std::size_t(i)];  // unquantized dY
    EXPECT_LT(rel_error(db, dbref), 1e-6);
}

TEST(Fp8Linear, SmoothSwigluQuantizesScaledChannelsAndUndoesTheScale) {
    for (const char* name : {"baseline", "current", "mxfp8"}) {
        const TrainingRecipe recipe = training_recipe(name);
        Fp8Linear lin(cpu(), {LinearInfo{"blocks.0.mlp.fc2", 0, K, M}});
        lin.set_recipe(recipe);
        auto X = randn(N * K, 1), W = randn(M * K, 2, 0.05f), dY = randn(N * M, 3);
        std::vector<float> s(K);
        for (std::int64_t k = 0; k < K; ++k) {
            s[std::size_t(k)] = std::ldexp(1.0f, int(k % 7) - 3);
            for (std::int64_t n = 0; n < N; ++n) X[std::size_t(n * K + k)] /= s[std::size_t(k)];  // outlier channels
        }
        std::vector<float> Xs(X), Ws(W), Y(N * M), dX(N * K), dW(M * K);
        for (std::int64_t i = 0; i < N * K; ++i) Xs[std::size_t(i)] *= s[std::size_t(i % K)];
        for (std::int64_t i = 0; i < M * K; ++i) Ws[std::size_t(i)] /= s[std::size_t(i % K)];
        lin.forward(0, act(X), W.data(), nullptr, act(Y), N, s.data(), true);
        lin.backward(0, act(dY), act(X), W.data(), act(dX), dW.data(), nullptr, N, s.data());
        lin.flush_reports();
        auto Xq = fake_q(Xs, N, K, recipe.x, nullptr), Wq = fake_q(Ws, M, K, recipe.w, nullptr);
        EXPECT_LT(rel_error(Y, gemm_nt(Xq, Wq, N, M, K)), 1e-5) << name;
        if (!recipe.quantized()) {
            EXPECT_LT(rel_error(Y, gemm_nt(X, W, N, M, K)), 1e-5);  // a no-op in float32
        }
        auto dYq = fake_q(dY, N, M, recipe.dy, nullptr);
        Vec dXref = gemm_nt(dYq, fake_q(transposed(Ws, M, K), K, M, recipe.w, nullptr), N, K, M);
        for (std::int64_t i = 0; i < N * K; ++i) dXref[std::size_t(i)] *= s[std::size_t(i % K)];
        EXPECT_LT(rel_error(dX, dXref), 1e-5) << name;
        Vec dWref = gemm_nt(fake_q(transposed(dY, N, M), M, N, recipe.dy, nullptr),
                            fake_q(transposed(Xs, N, K), K, N, recipe.x, nullptr), M, K, N);
        for (std::int64_t i = 0; i < M * K; ++i) dWref[std::size_t(i)] /= s[std::size_t(i % K)];
        EXPECT_LT(rel_error(dW, dWref), 1e-5) << name;
    }
}

TEST(Fp8Linear, EvaluationLeavesDelayedHistoriesAlone) {
    Fp8Linear lin(cpu(), {LinearInfo{"l", 0, K, M}});
    lin.set_recipe(training_recipe("delayed"));
    auto X = randn(N * K, 1), W = randn(M * K, 2);
    std::vector<float> Y(N * M);
    lin.forward(0, act(X), W.data(), nullptr, act(Y), N, nullptr, true);
    ASSERT_EQ(lin.delayed_state(0, Operand::X)->history().size(), 1u);
    float scale = lin.delayed_state(0, Operand::X)->scale();
    lin.forward(0, act(X), W.data(), nullptr, act(Y), N, nullptr, false);
    EXPECT_EQ(lin.delayed_state(0, Operand::X)->history().size(), 1u);
    EXPECT_EQ(lin.delayed_state(0, Operand::X)->scale(), scale);
    EXPECT_EQ(lin.delayed_state(0, Operand::W)->history().size(), 1u);
}

// Every training cast reports the operand's amax and scale, capture step or not; the
// figures are checked against max |x| and the delayed rule computed here.
TEST(Fp8Linear, TrainingCastsReportAmaxAndScaleEveryStep) {
    struct ScalingSink : CaptureSink {
        std::vector<OperandScaling> seen;
        void on_operand(const OperandCapture&) override {}
        void on_op(const OpTiming&) override {}
        void on_scaling(const OperandScaling& s) override { seen.push_back(s); }
    };
    auto amax_of = [](const std::vector<float>& v) {
        float m = 0;
        for (float x : v) m = std::max(m, std::abs(x));
        return m;
    };
    for (const char* name : {"delayed", "mxfp8"}) {
        SCOPED_TRACE(name);
        Fp8Linear lin(cpu(), {LinearInfo{"l", 0, K, M}});
        lin.set_recipe(training_recipe(name));
        ScalingSink sink;
        lin.set_capture(&sink, false);
        const bool delayed = std::string(name) == "delayed";
        float x_scale = 1.0f, x_history_max = 0.0f;  // delayed: the first step casts with s = 1
        for (int step = 0; step < 3; ++step) {
            auto X = randn(N * K, 10 + step, 1.0f + step), W = randn(M * K, 20 + step), dY = randn(N * M, 30 + step);
            std::vector<float> Y(N * M), dX(N * K), dW(M * K);
            sink.seen.clear();
            lin.forward(0, act(X), W.data(), nullptr, act(Y), N, nullptr, true);
            lin.backward(0, act(dY), act(X), W.data(), act(dX), dW.data(), nullptr, N, nullptr);
            lin.flush_reports();
            ASSERT_EQ(sink.seen.size(), 3u);  // x, w, dy: once each
            std::map<Operand, float> want{{Operand::X, amax_of(X)}, {Operand::W, amax_of(W)}, {Operand::DY, amax_of(dY)}};
            for (const auto& s : sink.seen) {
                EXPECT_EQ(s.linear, 0);
                EXPECT_EQ(s.cast.amax, want.at(s.operand));
                if (!delayed) {
                    EXPECT_TRUE(std::isnan(s.cast.scale));
                }
            }
            if (delayed) {
                EXPECT_EQ(sink.seen[0].operand, Operand::X);
                EXPECT_EQ(sink.seen[0].cast.scale, x_scale);
                x_history_max = std::max(x_history_max, amax_of(X));
                x_scale = 448.0f / x_history_max;  // algo max over the history, margin 0
            }
            // Evaluation casts are not training casts: nothing is reported.
            sink.seen.clear();
            lin.forward(0, act(X), W.data(), nullptr, act(Y), N, nullptr, false);
            EXPECT_TRUE(sink.seen.empty());
        }
    }
}

TEST(Fp8Linear, RecipeStateRoundTripsAndRejectsDamage) {
    Fp8Linear a(cpu(), {LinearInfo{"l0", 0, K, M}, LinearInfo{"l1", 0, M, K}});
    auto X = randn(N * K, 1, 3.0f), W = randn(M * K, 2), dY = randn(N * M, 3);
    std::vector<float> Y(N * M), dX(N * K), dW(M * K);
    for (const char* name : {"delayed", "delayed_e4m3"}) {
        a.set_recipe(training_recipe(name));
        for (int s = 0; s < 2; ++s) {
            a.forward(0, act(X), W.data(), nullptr, act(Y), N, nullptr, true);
            a.backward(0, act(dY), act(X), W.data(), act(dX), dW.data(), nullptr, N, nullptr);
            a.flush_reports();
        }
    }
    a.set_recipe(training_recipe("delayed"));
    auto bytes = a.save_state();
    Fp8Linear b(cpu(), {LinearInfo{"l0", 0, K, M}, LinearInfo{"l1", 0, M, K}});
    b.set_recipe(training_recipe("delayed"));
    b.load_state(bytes);
    for (const char* name : {"delayed", "delayed_e4m3"}) {
        a.set_recipe(training_recipe(name));
        b.set_recipe(training_recipe(name));
        for (Operand o : {Operand::X, Operand::W, Operand::DY}) {
            EXPECT_EQ(b.delayed_state(0, o)->history(), a.delayed_state(0, o)->history());
            EXPECT_EQ(b.delayed_state(0, o)->scale(), a.delayed_state(0, o)->scale());
            EXPECT_EQ(b.delayed_state(0, o)->history().size(), 2u);
            EXPECT_TRUE(b.delayed_state(1, o)->history().empty());
        }
    }
    EXPECT_EQ(b.save_state(), bytes);
    auto cut = bytes;
    cut.pop_back();
    EXPECT_THROW(b.load_state(cut), std::runtime_error);
    auto bad = bytes;
    bad[0] = 'X';
    EXPECT_THROW(b.load_state(bad), std::runtime_error);
    Fp8Linear c(cpu(), {LinearInfo{"l0", 0, K, M}});
    EXPECT_THROW(c.load_state(bytes), std::runtime_error);
}

TEST(Fp8Linear, ColumnwiseIsTransposeOnlyForSymmetricScaling) {
    EXPECT_TRUE(columnwise_is_transpose(std::nullopt));
    EXPECT_TRUE(columnwise_is_transpose(training_recipe("current").x));
    EXPECT_TRUE(columnwise_is_transpose(training_recipe("delayed").dy));
    EXPECT_TRUE(columnwise_is_transpose(training_recipe("blockwise").w));   // 128x128
    EXPECT_FALSE(columnwise_is_transpose(training_recipe("blockwise").x));  // 1x128
    EXPECT_FALSE(columnwise_is_transpose(training_recipe("mxfp8").w));
}

}  // namespace
}  // namespace fp8scope
