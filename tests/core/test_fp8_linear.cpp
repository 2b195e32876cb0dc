// The quantized linear layer against the test's own oracle: every operand quantized by
// quantize() + dequantize() in its GEMM orientation (the test transposes explicitly, so
// the layer's "columnwise = transposed rowwise" shortcut is checked too), then a float64
// GEMM. Delayed scaling is mirrored by the test's own DelayedState objects. Shapes are
// multiples of 32 (MX blocks) but not of 128, so blockwise edge blocks are partial.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "engine/fp8_linear.h"

namespace fp8scope {
namespace {

using Vec = std::vector<double>;

std::vector<float> randn(std::size_t n, unsigned seed, float scale = 1.0f) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> d(0.0f, scale);
    std::vector<float> v(n);
    for (auto& x : v) x = d(rng);
    return v;
}

std::vector<float> transposed(const std::vector<float>& m, std::int64_t rows, std::int64_t cols) {
    std::vector<float> t(m.size());
    for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t c = 0; c < cols; ++c) t[std::size_t(c * rows + r)] = m[std::size_t(r * cols + c)];
    return t;
}

// The values a GEMM should see: quantize + dequantize (or the input when unquantized).
std::vector<float> fake_q(const std::vector<float>& v, std::int64_t rows, std::int64_t cols,
                          const std::optional<Recipe>& r, DelayedState* state) {
    if (!r) return v;
    QuantizedTensor q = quantize(MatrixView{v.data(), rows, cols}, *r, state);
    std::vector<float> out(v.size());
    dequantize(q, out.data());
    return out;
}

// c (m,n) = a (m,k) b (n,k)^T in float64
Vec gemm_nt(const std::vector<float>& a, const std::vector<float>& b, std::int64_t m, std::int64_t n, std::int64_t k) {
    Vec c(std::size_t(m * n));
    for (std::int64_t i = 0; i < m; ++i)
        for (std::int64_t j = 0; j < n; ++j) {
            double s = 0;
            for (std::int64_t p = 0; p < k; ++p) s += double(a[std::size_t(i * k + p)]) * b[std::size_t(j * k + p)];
            c[std::size_t(i * n + j)] = s;
        }
    return c;
}

// max |got - want| relative to max |want|; float32 accumulation over <= 160 terms.
double rel_error(const std::vector<float>& got, const Vec& want) {
    double err = 0, scale = 0;
    for (std::size_t i = 0; i < want.size(); ++i) {
        err = std::max(err, std::abs(got[i] - want[i]));
        scale = std::max(scale, std::abs(want[i]));
    }
    return err / scale;
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
        operands.push_back({o.gemm, o.operand, o.values.rows, o.values.cols,
                            std::vector<float>(o.values.data, o.values.data + o.values.size()), o.recipe != nullptr,
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
    Fp8Linear lin({LinearInfo{"blocks.0.attn.proj", 0, K, M}});
    lin.set_recipe(recipe);
    RecordingSink sink;
    lin.set_capture(&sink, true);
    auto sx = delayed_for(recipe.x), sw = delayed_for(recipe.w), sdy = delayed_for(recipe.dy);

    for (int step = 0; step < 3; ++step) {  // the amax grows, so delayed scales move
        auto X = randn(N * K, 10 + step, 1.0f + 2 * step), W = randn(M * K, 20 + step, 0.05f);
        auto b = randn(M, 30), dY = randn(N * M, 40 + step, 1e-3f * (step + 1));
        std::vector<float> Y(N * M), dX(N * K), dW(M * K), db(M);
        sink.operands.clear();
        lin.forward(0, X.data(), W.data(), b.data(), Y.data(), N, nullptr, true);
        auto cx = sx, cw = sw;  // states as the forward cast saw them
        auto Xq = fake_q(X, N, K, recipe.x, ptr(sx)), Wq = fake_q(W, M, K, recipe.w, ptr(sw));
        Vec Yref = gemm_nt(Xq, Wq, N, M, K);
        for (std::int64_t i = 0; i < N * M; ++i) Yref[std::size_t(i)] += b[std::size_t(i % M)];
        EXPECT_LT(rel_error(Y, Yref), 1e-5) << "fprop step " << step;
        if (recipe.quantized()) {  // and the check can tell quantized from float32
            Vec Yf = gemm_nt(X, W, N, M, K);
            for (std::int64_t i = 0; i < N * M; ++i) Yf[std::size_t(i)] += b[std::size_t(i % M)];
            EXPECT_GT(rel_error(Y, Yf), 1e-4) << "fprop step " << step;
        }

        lin.backward(0, dY.data(), X.data(), W.data(), dX.data(), dW.data(), db.data(), N, nullptr);
        auto cdy = sdy;
        auto dYq = fake_q(dY, N, M, recipe.dy, ptr(sdy));
        auto cw2 = cw;
        auto Wtq = fake_q(transposed(W, M, K), K, M, recipe.w, ptr(cw2));
        EXPECT_LT(rel_error(dX, gemm_nt(dYq, Wtq, N, K, M)), 1e-5) << "dgrad step " << step;
        auto cdy2 = cdy, cx2 = cx;
        auto dYtq = fake_q(transposed(dY, N, M), M, N, recipe.dy, ptr(cdy2));
        auto Xtq = fake_q(transposed(X, N, K), K, N, recipe.x, ptr(cx2));
        EXPECT_LT(rel_error(dW, gemm_nt(dYtq, Xtq, M, K, N)), 1e-5) << "wgrad step " << step;
        Vec dbref(M, 0.0);
        for (std::int64_t i = 0; i < N * M; ++i) dbref[std::size_t(i % M)] += dY[std::size_t(i)];
        EXPECT_LT(rel_error(db, dbref), 1e-5);

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

TEST(Fp8Linear, SmoothSwigluQuantizesScaledChannelsAndUndoesTheScale) {
    for (const char* name : {"baseline", "current", "mxfp8"}) {
        const TrainingRecipe recipe = training_recipe(name);
        Fp8Linear lin({LinearInfo{"blocks.0.mlp.fc2", 0, K, M}});
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
        lin.forward(0, X.data(), W.data(), nullptr, Y.data(), N, s.data(), true);
        lin.backward(0, dY.data(), X.data(), W.data(), dX.data(), dW.data(), nullptr, N, s.data());
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
    Fp8Linear lin({LinearInfo{"l", 0, K, M}});
    lin.set_recipe(training_recipe("delayed"));
    auto X = randn(N * K, 1), W = randn(M * K, 2);
    std::vector<float> Y(N * M);
    lin.forward(0, X.data(), W.data(), nullptr, Y.data(), N, nullptr, true);
    ASSERT_EQ(lin.delayed_state(0, Operand::X)->history().size(), 1u);
    float scale = lin.delayed_state(0, Operand::X)->scale();
    lin.forward(0, X.data(), W.data(), nullptr, Y.data(), N, nullptr, false);
    EXPECT_EQ(lin.delayed_state(0, Operand::X)->history().size(), 1u);
    EXPECT_EQ(lin.delayed_state(0, Operand::X)->scale(), scale);
    EXPECT_EQ(lin.delayed_state(0, Operand::W)->history().size(), 1u);
}

TEST(Fp8Linear, RecipeStateRoundTripsAndRejectsDamage) {
    Fp8Linear a({LinearInfo{"l0", 0, K, M}, LinearInfo{"l1", 0, M, K}});
    auto X = randn(N * K, 1, 3.0f), W = randn(M * K, 2), dY = randn(N * M, 3);
    std::vector<float> Y(N * M), dX(N * K), dW(M * K);
    for (const char* name : {"delayed", "delayed_e4m3"}) {
        a.set_recipe(training_recipe(name));
        for (int s = 0; s < 2; ++s) {
            a.forward(0, X.data(), W.data(), nullptr, Y.data(), N, nullptr, true);
            a.backward(0, dY.data(), X.data(), W.data(), dX.data(), dW.data(), nullptr, N, nullptr);
        }
    }
    a.set_recipe(training_recipe("delayed"));
    auto bytes = a.save_state();
    Fp8Linear b({LinearInfo{"l0", 0, K, M}, LinearInfo{"l1", 0, M, K}});
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
    Fp8Linear c({LinearInfo{"l0", 0, K, M}});
    EXPECT_THROW(c.load_state(bytes), std::runtime_error);
}

TEST(Fp8Linear, ColumnwiseIsTransposeOnlyForSymmetricScaling) {
    EXPECT_TRUE(columnwise_is_transpose(std::nullopt));
    EXPECT_TRUE(columnwise_is_transpose(*training_recipe("current").x));
    EXPECT_TRUE(columnwise_is_transpose(*training_recipe("delayed").dy));
    EXPECT_TRUE(columnwise_is_transpose(*training_recipe("blockwise").w));   // 128x128
    EXPECT_FALSE(columnwise_is_transpose(*training_recipe("blockwise").x));  // 1x128
    EXPECT_FALSE(columnwise_is_transpose(*training_recipe("mxfp8").w));
}

}  // namespace
}  // namespace fp8scope
