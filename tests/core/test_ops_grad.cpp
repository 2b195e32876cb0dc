// Gradient checks of every layer op against central differences of an independent
// float64 forward (engine_reference.h). Each op's scalar objective is sum(out * R) with a
// fixed random R (softmax-CE: its mean loss), so dout = R. The comparison is relative to
// the largest true gradient: float32 rounding gives ~1e-6, while a wrong sign or a missing
// term gives O(1); LayerNormRejectsAMissingTerm shows the check catching a dropped term.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "cpu/ops/activation.h"
#include "cpu/ops/attention.h"
#include "cpu/ops/embedding.h"
#include "cpu/ops/matmul.h"
#include "cpu/ops/norm.h"
#include "cpu/ops/rope.h"
#include "cpu/ops/softmax_ce.h"
#include "engine/model_config.h"
#include "engine_reference.h"

namespace fp8scope {
namespace {

using ref::Vec;

std::vector<float> randn(std::size_t n, unsigned seed, float scale = 1.0f) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> d(0.0f, scale);
    std::vector<float> v(n);
    for (auto& x : v) x = d(rng);
    return v;
}

Vec to64(const std::vector<float>& v) { return Vec(v.begin(), v.end()); }

double dot(const Vec& a, const Vec& r) {
    double s = 0;
    for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * r[i];
    return s;
}

// max |analytic - numeric| / max |numeric|
double rel_error(const std::vector<float>& analytic, const Vec& numeric) {
    double err = 0, scale = 0;
    for (std::size_t i = 0; i < numeric.size(); ++i) {
        err = std::max(err, std::abs(double(analytic[i]) - numeric[i]));
        scale = std::max(scale, std::abs(numeric[i]));
    }
    return err / std::max(scale, 1e-12);
}

constexpr double kTol = 2e-4;

TEST(OpsGrad, Embedding) {
    const int B = 2, T = 3, C = 4, V = 5;
    std::vector<std::int32_t> tok = {1, 4, 1, 0, 1, 3};  // repeats: the scatter must add
    auto wte = randn(V * C, 1), wpe = randn(T * C, 2), R = randn(B * T * C, 3);
    std::vector<float> out(B * T * C);
    ops::embedding_forward(out.data(), tok.data(), wte.data(), wpe.data(), B, T, C);
    EXPECT_LT(rel_error(out, ref::embedding(tok, to64(wte), to64(wpe), B, T, C)), 1e-6);
    std::vector<float> dwte(V * C, 0.0f), dwpe(T * C, 0.0f);
    ops::embedding_backward(dwte.data(), dwpe.data(), R.data(), tok.data(), B, T, C);
    auto f_wte = [&](const Vec& w) { return dot(ref::embedding(tok, w, to64(wpe), B, T, C), to64(R)); };
    auto f_wpe = [&](const Vec& w) { return dot(ref::embedding(tok, to64(wte), w, B, T, C), to64(R)); };
    EXPECT_LT(rel_error(dwte, ref::numeric_grad(f_wte, to64(wte))), kTol);
    EXPECT_LT(rel_error(dwpe, ref::numeric_grad(f_wpe, to64(wpe))), kTol);
}

struct NormCase {
    std::size_t N = 5, C = 7;
    std::vector<float> x = randn(N * C, 11, 2.0f), w = randn(C, 12), b = randn(C, 13), R = randn(N * C, 14);
    std::vector<float> dx0 = randn(N * C, 15);  // backward adds into dinp
};

TEST(OpsGrad, LayerNorm) {
    NormCase k;
    const auto N = k.N, C = k.C;
    std::vector<float> out(N * C), mean(N), rstd(N), dx = k.dx0, dw(C, 9.0f), db(C, 9.0f);
    ops::layernorm_forward(out.data(), mean.data(), rstd.data(), k.x.data(), k.w.data(), k.b.data(), N, int(C));
    EXPECT_LT(rel_error(out, ref::norm(to64(k.x), to64(k.w), to64(k.b), N, C, false)), 1e-6);
    ops::layernorm_backward(dx.data(), dw.data(), db.data(), k.R.data(), k.x.data(), k.w.data(), mean.data(),
                            rstd.data(), N, int(C));
    for (std::size_t i = 0; i < dx.size(); ++i) dx[i] -= k.dx0[i];
    auto R = to64(k.R);
    auto fx = [&](const Vec& v) { return dot(ref::norm(v, to64(k.w), to64(k.b), N, C, false), R); };
    auto fw = [&](const Vec& v) { return dot(ref::norm(to64(k.x), v, to64(k.b), N, C, false), R); };
    auto fb = [&](const Vec& v) { return dot(ref::norm(to64(k.x), to64(k.w), v, N, C, false), R); };
    EXPECT_LT(rel_error(dx, ref::numeric_grad(fx, to64(k.x))), kTol);
    EXPECT_LT(rel_error(dw, ref::numeric_grad(fw, to64(k.w))), kTol);
    EXPECT_LT(rel_error(db, ref::numeric_grad(fb, to64(k.b))), kTol);
}

TEST(OpsGrad, LayerNormRejectsAMissingTerm) {
    // The input gradient without the "- xhat * mean(dxhat * xhat)" term must fail the check.
    NormCase k;
    const auto N = k.N, C = k.C;
    std::vector<float> wrong(N * C);
    for (std::size_t n = 0; n < N; ++n) {
        double m = 0, v = 0, md = 0;
        for (std::size_t c = 0; c < C; ++c) m += k.x[n * C + c] / double(C);
        for (std::size_t c = 0; c < C; ++c) v += (k.x[n * C + c] - m) * (k.x[n * C + c] - m) / double(C);
        for (std::size_t c = 0; c < C; ++c) md += k.w[c] * k.R[n * C + c] / double(C);
        for (std::size_t c = 0; c < C; ++c)
            wrong[n * C + c] = float((k.w[c] * k.R[n * C + c] - md) / std::sqrt(v + 1e-5));
    }
    auto fx = [&](const Vec& v) { return dot(ref::norm(v, to64(k.w), to64(k.b), N, C, false), to64(k.R)); };
    EXPECT_GT(rel_error(wrong, ref::numeric_grad(fx, to64(k.x))), 100 * kTol);
}

TEST(OpsGrad, RMSNorm) {
    NormCase k;
    const auto N = k.N, C = k.C;
    std::vector<float> out(N * C), rstd(N), dx = k.dx0, dw(C, 9.0f);
    ops::rmsnorm_forward(out.data(), rstd.data(), k.x.data(), k.w.data(), N, int(C));
    EXPECT_LT(rel_error(out, ref::norm(to64(k.x), to64(k.w), {}, N, C, true)), 1e-6);
    ops::rmsnorm_backward(dx.data(), dw.data(), k.R.data(), k.x.data(), k.w.data(), rstd.data(), N, int(C));
    for (std::size_t i = 0; i < dx.size(); ++i) dx[i] -= k.dx0[i];
    auto R = to64(k.R);
    auto fx = [&](const Vec& v) { return dot(ref::norm(v, to64(k.w), {}, N, C, true), R); };
    auto fw = [&](const Vec& v) { return dot(ref::norm(to64(k.x), v, {}, N, C, true), R); };
    EXPECT_LT(rel_error(dx, ref::numeric_grad(fx, to64(k.x))), kTol);
    EXPECT_LT(rel_error(dw, ref::numeric_grad(fw, to64(k.w))), kTol);
}

TEST(OpsGrad, CausalAttention) {
    const int B = 2, T = 5, C = 8, NH = 2;
    auto qkv = randn(std::size_t(B) * T * 3 * C, 21), R = randn(std::size_t(B) * T * C, 22);
    std::vector<float> out(std::size_t(B) * T * C), att(std::size_t(B) * NH * T * T);
    ops::attention_forward(out.data(), att.data(), qkv.data(), B, T, C, NH, NH);
    EXPECT_LT(rel_error(out, ref::attention(to64(qkv), B, T, C, NH)), 1e-5);
    // causal: nothing attends to the future
    for (int bh = 0; bh < B * NH; ++bh)
        for (int t = 0; t < T; ++t)
            for (int u = t + 1; u < T; ++u) EXPECT_EQ(att[(std::size_t(bh) * T + t) * T + u], 0.0f);
    std::vector<float> dqkv(qkv.size(), 7.0f);  // overwritten
    ops::attention_backward(dqkv.data(), R.data(), qkv.data(), att.data(), B, T, C, NH, NH);
    auto f = [&](const Vec& v) { return dot(ref::attention(v, B, T, C, NH), to64(R)); };
    EXPECT_LT(rel_error(dqkv, ref::numeric_grad(f, to64(qkv))), kTol);
}

// Grouped-query attention with rotary positions, as the model runs it: RoPE on q and k in
// place, attention, its backward, RoPE's inverse on dqkv; against the float64 reference
// (its own rotation from the formula, angles in double) and its central differences.
// Groups of 2 and 4 query heads per key/value head, and multi-head (group 1).
TEST(OpsGrad, GroupedQueryAttentionWithRope) {
    struct Case {
        int NH, NKV;
        double theta;
    };
    for (const Case k : {Case{4, 2, 10000.0}, Case{4, 1, 100.0}, Case{2, 2, 10.0}}) {
        const int B = 2, T = 6, hs = 4, C = k.NH * hs, W = C + 2 * k.NKV * hs;
        SCOPED_TRACE("NH " + std::to_string(k.NH) + " NKV " + std::to_string(k.NKV));
        const auto qkv = randn(std::size_t(B) * T * W, 23), R = randn(std::size_t(B) * T * C, 24);
        const std::vector<float> table = rope_table(T, hs, k.theta);
        std::vector<float> rotated = qkv, out(std::size_t(B) * T * C), att(std::size_t(B) * k.NH * T * T);
        ops::rope(rotated.data(), table.data(), B, T, k.NH, k.NKV, hs, false);
        ops::attention_forward(out.data(), att.data(), rotated.data(), B, T, C, k.NH, k.NKV);
        auto f64 = [&](const Vec& v) { return ref::attention(v, B, T, C, k.NH, k.NKV, k.theta); };
        EXPECT_LT(rel_error(out, f64(to64(qkv))), 1e-5);
        std::vector<float> dqkv(qkv.size(), 7.0f);  // overwritten
        ops::attention_backward(dqkv.data(), R.data(), rotated.data(), att.data(), B, T, C, k.NH, k.NKV);
        ops::rope(dqkv.data(), table.data(), B, T, k.NH, k.NKV, hs, true);
        auto f = [&](const Vec& v) { return dot(f64(v), to64(R)); };
        EXPECT_LT(rel_error(dqkv, ref::numeric_grad(f, to64(qkv))), kTol);
    }
}

// The rotation against hand-computed values: at position 1 with hs 4 and theta 100, pair
// 0 turns by 1 rad and pair 1 by 100^(-1/2) = 0.1 rad; v and position 0 are left alone.
TEST(OpsGrad, RopePairsTheHalvesOfAHead) {
    const int B = 1, T = 2, NH = 1, NKV = 1, hs = 4;
    std::vector<float> x = {1, 2, 3, 4, 5, 6, 7, 8, 9, 9, 9, 9,     // t = 0: q, k, v
                            1, 0, 0, 0, 0, 1, 0, 0, 9, 9, 9, 9};    // t = 1
    const std::vector<float> table = rope_table(T, hs, 100.0);
    ops::rope(x.data(), table.data(), B, T, NH, NKV, hs, false);
    const std::vector<float> t0 = {1, 2, 3, 4, 5, 6, 7, 8, 9, 9, 9, 9};
    for (int i = 0; i < 12; ++i) EXPECT_EQ(x[std::size_t(i)], t0[std::size_t(i)]) << i;
    // q = (1, 0 | 0, 0): x1 = 1 of pair 0 -> (cos 1, sin 1) in elements 0 and 2
    const float q1[] = {std::cos(1.0f), 0, std::sin(1.0f), 0};
    // k = (0, 1 | 0, 0): x1 = 1 of pair 1 -> (cos 0.1, sin 0.1) in elements 1 and 3
    const float k1[] = {0, std::cos(0.1f), 0, std::sin(0.1f)};
    for (int i = 0; i < 4; ++i) {
        EXPECT_NEAR(x[std::size_t(12 + i)], q1[i], 1e-6) << "q " << i;
        EXPECT_NEAR(x[std::size_t(16 + i)], k1[i], 1e-6) << "k " << i;
        EXPECT_EQ(x[std::size_t(20 + i)], 9.0f) << "v " << i;
    }
}

TEST(OpsGrad, Gelu) {
    auto x = randn(50, 31, 2.0f), R = randn(50, 32);
    std::vector<float> out(50), dx(50);
    ops::gelu_forward(out.data(), x.data(), 50);
    EXPECT_LT(rel_error(out, ref::gelu(to64(x))), 1e-6);
    ops::gelu_backward(dx.data(), x.data(), R.data(), 50);
    auto f = [&](const Vec& v) { return dot(ref::gelu(v), to64(R)); };
    EXPECT_LT(rel_error(dx, ref::numeric_grad(f, to64(x))), kTol);
}

TEST(OpsGrad, SwiGLU) {
    const std::size_t N = 4, H = 6;
    auto x = randn(N * 2 * H, 41, 2.0f), R = randn(N * H, 42);
    std::vector<float> out(N * H), dx(N * 2 * H);
    ops::swiglu_forward(out.data(), x.data(), N, int(H));
    EXPECT_LT(rel_error(out, ref::swiglu(to64(x), N, H)), 1e-6);
    ops::swiglu_backward(dx.data(), x.data(), R.data(), N, int(H));
    auto f = [&](const Vec& v) { return dot(ref::swiglu(v, N, H), to64(R)); };
    EXPECT_LT(rel_error(dx, ref::numeric_grad(f, to64(x))), kTol);
}

TEST(OpsGrad, SoftmaxCrossEntropy) {
    const std::size_t N = 6, V = 9;
    auto logits = randn(N * V, 51, 3.0f);
    std::vector<std::int32_t> tgt = {0, 8, 3, 3, 5, 1};
    std::vector<float> probs = logits, losses(N);  // in place, as the model runs it
    float loss = ops::softmax_ce_forward(probs.data(), losses.data(), probs.data(), tgt.data(), N, int(V));
    EXPECT_NEAR(loss, ref::cross_entropy(to64(logits), tgt, N, V), 1e-5);
    std::vector<float> dlogits = probs;
    ops::softmax_ce_backward(dlogits.data(), dlogits.data(), tgt.data(), N, int(V));  // in place, as the model does
    auto f = [&](const Vec& v) { return ref::cross_entropy(v, tgt, N, V); };
    EXPECT_LT(rel_error(dlogits, ref::numeric_grad(f, to64(logits))), kTol);
}

TEST(OpsGrad, Linear) {
    const std::size_t N = 5, K = 7, M = 3;
    auto x = randn(N * K, 61), w = randn(M * K, 62), b = randn(M, 63), R = randn(N * M, 64);
    std::vector<float> out(N * M), dx(N * K, 5.0f), dw(M * K, 5.0f), db(M, 5.0f);  // all overwritten
    ops::matmul_forward(out.data(), x.data(), w.data(), b.data(), N, K, M);
    EXPECT_LT(rel_error(out, ref::linear(to64(x), to64(w), to64(b), N, K, M)), 1e-6);
    ops::matmul_backward(dx.data(), dw.data(), db.data(), R.data(), x.data(), w.data(), N, K, M);
    auto fx = [&](const Vec& v) { return dot(ref::linear(v, to64(w), to64(b), N, K, M), to64(R)); };
    auto fw = [&](const Vec& v) { return dot(ref::linear(to64(x), v, to64(b), N, K, M), to64(R)); };
    auto fb = [&](const Vec& v) { return dot(ref::linear(to64(x), to64(w), v, N, K, M), to64(R)); };
    EXPECT_LT(rel_error(dx, ref::numeric_grad(fx, to64(x))), kTol);
    EXPECT_LT(rel_error(dw, ref::numeric_grad(fw, to64(w))), kTol);
    EXPECT_LT(rel_error(db, ref::numeric_grad(fb, to64(b))), kTol);
}

TEST(Ops, TransposeAwkwardShapes) {
    // Edges of the 64 tile and of the 8x8 register blocks, and a single row/column.
    for (auto [rows, cols] : {std::pair<std::int64_t, std::int64_t>{37, 70}, {130, 203}, {8, 8}, {1, 19}, {300, 1}}) {
        auto src = randn(std::size_t(rows * cols), 71);
        std::vector<float> dst(src.size());
        ops::transpose(dst.data(), src.data(), rows, cols);
        for (std::int64_t r = 0; r < rows; ++r)
            for (std::int64_t c = 0; c < cols; ++c)
                ASSERT_EQ(dst[std::size_t(c * rows + r)], src[std::size_t(r * cols + c)]) << rows << "x" << cols;
    }
}

TEST(Ops, SmoothSwigluScalesArePowersOfTwoPuttingChannelAbsmaxInOneToTwo) {
    const std::size_t N = 3, H = 4;
    std::vector<float> h = {0.3f, -5.0f, 0.0f, 1000.0f, -0.7f, 2.0f, 0.0f, 1.0f, 0.1f, 4.0f, 0.0f, -3.0f};
    std::vector<float> s(H);
    ops::smooth_swiglu_scales(s.data(), h.data(), N, int(H));
    // absmax per channel: 0.7, 5, 0 (-> 1), 1000
    EXPECT_EQ(s[0], 2.0f);      // 0.7 * 2 = 1.4
    EXPECT_EQ(s[1], 0.25f);     // 5 / 4 = 1.25
    EXPECT_EQ(s[2], 1.0f);
    EXPECT_EQ(s[3], 1.0f / 512);  // 1000 / 512 = 1.95
}

}  // namespace
}  // namespace fp8scope
