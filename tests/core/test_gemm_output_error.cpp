// The error of each GEMM's output at a capture step (engine/gemm_output_check.h, the CPU's
// AnalysisOps::output_error) against the test's own float64 oracle: the operands quantized
// by quantize() + dequantize() in their GEMM's orientation (transposed explicitly here),
// the GEMM of the dequantized operands against the GEMM of the unquantized ones, both in
// float64, and SQNR and relative error from their definitions. The layer's GEMMs run in
// float32, so the figures agree to float32 rounding, far below the quantization error.
#include <gtest/gtest.h>

#include <cmath>

#include "cpu/cpu_backend.h"
#include "engine/fp8_linear.h"
#include "support/linear_oracle.h"

namespace fp8scope {
namespace {

using namespace testing;

CpuBackend& backend() {
    static CpuBackend b(2);
    return b;
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
    std::vector<float> X = randn(N * K, 1, 1.0f), W = randn(M * K, 2, 0.05f), dY = randn(N * M, 3, 1e-3f);
    std::vector<float> Y = std::vector<float>(N * M), dX = std::vector<float>(N * K), dW = std::vector<float>(M * K);
    OutputSink sink;

    // alternating_rows: dY's odd rows times 2^-18 and X's divided by it (dW = dY^T X keeps
    // every product at one size), so a block along N crushes one of them.
    explicit Step(const std::string& recipe, bool capture = true, bool alternating_rows = false) {
        if (alternating_rows) {
            scale_odd_rows(dY, M, false);
            scale_odd_rows(X, K, true);
        }
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
    EXPECT_LT(rel_error(got, want), 1e-5) << what;
}

TEST(GemmOutputError, CurrentScalingFpropMatchesDequantizedOperandsAgainstUnquantized) {
    Step s("current");
    const TrainingRecipe r = training_recipe("current");
    const Vec ref = gemm_nt(s.X, s.W, N, M, K);
    const Vec out = gemm_nt(fake_q(s.X, N, K, r.x), fake_q(s.W, M, K, r.w), N, M, K);
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
// in the wrong orientation gives other figures. Power-of-two block scales are blind to the
// orientation except where a block's amax pushes small elements into subnormals, hence
// the alternating row magnitudes.
TEST(GemmOutputError, DgradAndWgradAreJudgedInTheirOwnOrientation) {
    Step s("blockwise", true, true);
    const TrainingRecipe r = training_recipe("blockwise");
    const auto Wt = transposed(s.W, M, K), dYt = transposed(s.dY, N, M), Xt = transposed(s.X, N, K);

    const Vec dgrad_ref = gemm_nt(s.dY, Wt, N, K, M);  // dX = dY W
    const Vec dgrad_out = gemm_nt(fake_q(s.dY, N, M, r.dy), fake_q(Wt, K, M, r.w), N, K, M);
    const Seen& d = s.sink.of(Gemm::Dgrad);
    expect_figures(d.error, figures(dgrad_out, dgrad_ref), "dgrad");
    expect_reference(d.reference, dgrad_ref, "dgrad reference");

    const Vec wgrad_ref = gemm_nt(dYt, Xt, M, K, N);  // dW = dY^T X
    const Vec wgrad_out = gemm_nt(fake_q(dYt, M, N, r.dy), fake_q(Xt, K, N, r.x), M, K, N);
    const Seen& w = s.sink.of(Gemm::Wgrad);
    expect_figures(w.error, figures(wgrad_out, wgrad_ref), "wgrad");
    expect_reference(w.reference, wgrad_ref, "wgrad reference");

    // dY cast along M (dgrad's blocks) gives wgrad other figures: the check above can fail.
    const Vec wrong = gemm_nt(transposed(fake_q(s.dY, N, M, r.dy), N, M), fake_q(Xt, K, N, r.x), M, K, N);
    EXPECT_GT(std::abs(figures(wrong, wgrad_ref).sqnr_db - figures(wgrad_out, wgrad_ref).sqnr_db), 1.0);
}

// A fused GELU: what is compared is the GELU's input (the GEMM's result with the bias),
// not the GELU's output, against the unquantized GEMM with the same bias.
TEST(GemmOutputError, AFusedGeluComparesTheGemmResultWithBias) {
    const TrainingRecipe r = training_recipe("current");
    Step s("baseline");
    std::vector<float> bias = randn(M, 4, 0.5f), aux(N * M);
    OutputSink sink;
    Fp8Linear lin(backend(), {LinearInfo{"blocks.0.mlp.fc", 0, K, M}});
    lin.set_recipe(r);
    lin.set_capture(&sink, true);
    lin.forward(0, act(s.X), s.W.data(), bias.data(), act(s.Y), N, nullptr, true,
                {GemmEpilogue::Kind::Gelu, act(aux)});
    Vec ref = gemm_nt(s.X, s.W, N, M, K), out = gemm_nt(fake_q(s.X, N, K, r.x), fake_q(s.W, M, K, r.w), N, M, K);
    for (std::size_t i = 0; i < ref.size(); ++i) {
        ref[i] += bias[i % std::size_t(M)];
        out[i] += bias[i % std::size_t(M)];
    }
    const Seen& f = sink.of(Gemm::Fprop);
    expect_figures(f.error, figures(out, ref), "fprop with GELU");
    expect_reference(f.reference, ref, "fprop with GELU reference");
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
