// The error of each GEMM's output at a capture step (engine/gemm_output_check.h, the CPU's
// AnalysisOps::output_error) against the test's own float64 oracle: the operands quantized
// by quantize() + dequantize() in their GEMM's orientation (transposed explicitly here),
// the GEMM of the dequantized operands against the GEMM of the unquantized ones, both in
// float64, and SQNR and relative error from their definitions. The layer's GEMMs run in
// float32, so the figures agree to float32 rounding, far below the quantization error.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "cpu/cpu_backend.h"
#include "cpu/quantize.h"
#include "engine/fp8_linear.h"

namespace fp8scope {
namespace {

using Vec = std::vector<double>;

CpuBackend& backend() {
    static CpuBackend b(2);
    return b;
}

ActPtr act(std::vector<float>& v) { return ActPtr{reinterpret_cast<std::byte*>(v.data()), DType::F32}; }

std::vector<float> normal(std::size_t n, unsigned seed, float scale) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> d(0.0f, scale);
    std::vector<float> v(n);
    for (auto& x : v) x = d(rng);
    return v;
}

std::vector<float> transpose(const std::vector<float>& m, std::int64_t rows, std::int64_t cols) {
    std::vector<float> t(m.size());
    for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t c = 0; c < cols; ++c) t[std::size_t(c * rows + r)] = m[std::size_t(r * cols + c)];
    return t;
}

// The values the cast hands its GEMM: quantize + dequantize along the last dimension.
std::vector<float> dequantized(const std::vector<float>& v, std::int64_t rows, std::int64_t cols,
                               const std::optional<Recipe>& r) {
    if (!r) return v;
    QuantizedTensor q = quantize(MatrixView{v.data(), rows, cols}, *r, nullptr);
    std::vector<float> out(v.size());
    dequantize(q, out.data());
    return out;
}

// c (m,n) = a (m,k) b (n,k)^T in float64
Vec product(const std::vector<float>& a, const std::vector<float>& b, std::int64_t m, std::int64_t n, std::int64_t k) {
    Vec c(std::size_t(m * n));
    for (std::int64_t i = 0; i < m; ++i)
        for (std::int64_t j = 0; j < n; ++j) {
            double s = 0;
            for (std::int64_t p = 0; p < k; ++p) s += double(a[std::size_t(i * k + p)]) * b[std::size_t(j * k + p)];
            c[std::size_t(i * n + j)] = s;
        }
    return c;
}

struct Figures {
    double sqnr_db, rel_err, max_abs;
};

// SQNR, relative L2 error and max |d| of `out` against `ref`, from their definitions.
Figures figures(const Vec& out, const Vec& ref) {
    double signal = 0, error = 0, max_abs = 0;
    for (std::size_t i = 0; i < ref.size(); ++i) {
        const double d = out[i] - ref[i];
        signal += ref[i] * ref[i];
        error += d * d;
        max_abs = std::max(max_abs, std::abs(d));
    }
    return {10 * std::log10(signal / error), std::sqrt(error / signal), max_abs};
}

struct Seen {
    Gemm gemm;
    OutputError error;
    std::vector<float> reference;
    bool own_reference;  // the output was its own reference (no second GEMM)
};

class OutputSink : public CaptureSink {
public:
    std::vector<Seen> seen;
    void on_operand(const OperandCapture&) override {}
    void on_op(const OpTiming&) override {}
    void on_gemm_output(const GemmOutputCapture& c) override {
        const float* r = static_cast<const float*>(c.reference.data);
        seen.push_back({c.gemm, c.analysis->output_error(c.output, c.reference),
                        std::vector<float>(r, r + c.reference.numel()), c.reference.data == c.output.data});
    }
    const Seen& of(Gemm g) const {
        for (const Seen& s : seen)
            if (s.gemm == g) return s;
        throw std::runtime_error("GEMM not seen");
    }
};

constexpr std::int64_t N = 64, K = 96, M = 160;

struct Step {
    std::vector<float> X = normal(N * K, 1, 1.0f), W = normal(M * K, 2, 0.05f), dY = normal(N * M, 3, 1e-3f);
    std::vector<float> Y = std::vector<float>(N * M), dX = std::vector<float>(N * K), dW = std::vector<float>(M * K);
    OutputSink sink;

    explicit Step(const std::string& recipe, bool capture = true) {
        Fp8Linear lin(backend(), {LinearInfo{"blocks.0.mlp.fc", 0, K, M}});
        lin.set_recipe(training_recipe(recipe));
        lin.set_capture(&sink, capture);
        lin.forward(0, act(X), W.data(), nullptr, act(Y), N, nullptr, true);
        lin.backward(0, act(dY), act(X), W.data(), act(dX), dW.data(), nullptr, N, nullptr);
    }
};

void expect_figures(const OutputError& got, const Figures& want, const char* what) {
    EXPECT_NEAR(got.sqnr_db(), want.sqnr_db, 1e-3) << what;
    EXPECT_NEAR(got.rel_err() / want.rel_err, 1.0, 1e-4) << what;
    EXPECT_NEAR(got.max_abs / want.max_abs, 1.0, 1e-3) << what;
}

void expect_reference(const std::vector<float>& got, const Vec& want, const char* what) {
    double worst = 0, scale = 0;
    for (std::size_t i = 0; i < want.size(); ++i) {
        worst = std::max(worst, std::abs(got[i] - want[i]));
        scale = std::max(scale, std::abs(want[i]));
    }
    EXPECT_LT(worst / scale, 1e-5) << what;
}

TEST(GemmOutputError, CurrentScalingFpropMatchesDequantizedOperandsAgainstUnquantized) {
    Step s("current");
    const TrainingRecipe r = training_recipe("current");
    const Vec ref = product(s.X, s.W, N, M, K);
    const Vec out = product(dequantized(s.X, N, K, r.x), dequantized(s.W, M, K, r.w), N, M, K);
    const Figures want = figures(out, ref);
    ASSERT_GT(want.sqnr_db, 20.0);  // E4M3 per tensor: a few per cent of error, not none
    ASSERT_LT(want.sqnr_db, 45.0);
    const Seen& f = s.sink.of(Gemm::Fprop);
    EXPECT_FALSE(f.own_reference);
    EXPECT_EQ(f.error.count, N * M);
    expect_figures(f.error, want, "fprop");
    expect_reference(f.reference, ref, "fprop reference");
}

// 1x128 blocks run along the contraction dimension, so dgrad's W and wgrad's dY and X are
// cast along the other axis than in the GEMM before: a reference or an output error taken
// in the wrong orientation gives other figures.
TEST(GemmOutputError, DgradAndWgradAreJudgedInTheirOwnOrientation) {
    Step s("blockwise");
    const TrainingRecipe r = training_recipe("blockwise");
    const auto Wt = transpose(s.W, M, K), dYt = transpose(s.dY, N, M), Xt = transpose(s.X, N, K);

    const Vec dgrad_ref = product(s.dY, Wt, N, K, M);  // dX = dY W
    const Vec dgrad_out = product(dequantized(s.dY, N, M, r.dy), dequantized(Wt, K, M, r.w), N, K, M);
    const Seen& d = s.sink.of(Gemm::Dgrad);
    expect_figures(d.error, figures(dgrad_out, dgrad_ref), "dgrad");
    expect_reference(d.reference, dgrad_ref, "dgrad reference");

    const Vec wgrad_ref = product(dYt, Xt, M, K, N);  // dW = dY^T X
    const Vec wgrad_out = product(dequantized(dYt, M, N, r.dy), dequantized(Xt, K, N, r.x), M, K, N);
    const Seen& w = s.sink.of(Gemm::Wgrad);
    expect_figures(w.error, figures(wgrad_out, wgrad_ref), "wgrad");
    expect_reference(w.reference, wgrad_ref, "wgrad reference");

    // dY cast along M (dgrad's blocks) gives wgrad other figures: the check above can fail.
    const Vec wrong = product(transpose(dequantized(s.dY, N, M, r.dy), N, M), dequantized(Xt, K, N, r.x), M, K, N);
    EXPECT_GT(std::abs(figures(wrong, wgrad_ref).sqnr_db - figures(wgrad_out, wgrad_ref).sqnr_db), 1e-2);
}

TEST(GemmOutputError, BaselineHasNoErrorAndRunsNoSecondGemm) {
    Step s("baseline");
    ASSERT_EQ(s.sink.seen.size(), 3u);
    for (const Seen& g : s.sink.seen) {
        EXPECT_TRUE(g.own_reference);
        EXPECT_EQ(g.error.error, 0.0);
        EXPECT_EQ(g.error.max_abs, 0.0f);
        EXPECT_GT(g.error.signal, 0.0);
        EXPECT_EQ(g.error.sqnr_db(), std::numeric_limits<double>::infinity());
        EXPECT_EQ(g.error.rel_err(), 0.0);
    }
}

TEST(GemmOutputError, NothingOutsideCaptureSteps) {
    Step s("current", false);
    EXPECT_TRUE(s.sink.seen.empty());
}

TEST(GemmOutputError, TrainingOutputsAreUnchangedByTheCheck) {
    Step with("mxfp8"), without("mxfp8", false);
    EXPECT_EQ(with.Y, without.Y);
    EXPECT_EQ(with.dX, without.dX);
    EXPECT_EQ(with.dW, without.dW);
}

}  // namespace
}  // namespace fp8scope
