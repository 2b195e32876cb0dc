// The activations, the elementwise ops, the bias gradient and softmax cross-entropy on the
// GPU (kernels/cuda/ops/ops.h) against the CPU ops, on awkward sizes and on pointers one
// element off 16-byte alignment (the unpacked path). Ops whose float32 arithmetic is the
// CPU's operation for operation (add, scale_columns, the CE gradient, the Smooth-SwiGLU
// scales) must match the BF16 rounding of the CPU result bit for bit; transcendental ones
// (GELU, SiLU, softmax: CUDA's tanhf/expf against the CPU's polynomial) get rtol 2^-7,
// twice the BF16 rounding.
#include <cmath>
#include <random>

#include "cpu/ops/activation.h"
#include "cpu/ops/matmul.h"
#include "cpu/ops/softmax_ce.h"
#include "test_cuda_ops.h"

namespace fp8scope {
namespace {

using testing::all_close;
using testing::Bf16Data;
using testing::Bits;
using testing::download_at;
using testing::GpuBuffer;
using testing::narrow;
using testing::random_bf16;
using testing::random_f32;
using testing::same_bits;
using testing::Scratch;
using testing::Stream;
using testing::upload_at;
using testing::widen;

constexpr double kBf16Rtol = 1.0 / 128;

// --- elementwise over n elements, at an offset of 0 or 1 element ------------------------------

struct Span {
    std::int64_t n;
    int offset;
};

class CudaPointwise : public ::testing::TestWithParam<Span> {};

TEST_P(CudaPointwise, GeluForward) {
    FP8SCOPE_REQUIRE_GPU();
    const auto [n, off] = GetParam();
    std::mt19937 rng(41);
    const Bf16Data x = random_bf16(std::size_t(n), rng, -6.0f, 6.0f);
    std::vector<float> ref(static_cast<std::size_t>(n));
    ops::gelu_forward(ref.data(), x.f.data(), n);

    GpuBuffer<std::uint16_t> in(std::size_t(n) + 8), out(std::size_t(n) + 8);
    upload_at(in, std::size_t(off), x.bits);
    Stream s;
    cuda::gelu_forward(out.get() + off, in.get() + off, n, s);
    s.sync();
    EXPECT_TRUE(all_close(widen(download_at(out, std::size_t(off), std::size_t(n))), ref, kBf16Rtol, 1e-3));
}

// dinp overwrites dout in place, as the engine may run it.
TEST_P(CudaPointwise, GeluBackwardInPlace) {
    FP8SCOPE_REQUIRE_GPU();
    const auto [n, off] = GetParam();
    std::mt19937 rng(42);
    const Bf16Data x = random_bf16(std::size_t(n), rng, -6.0f, 6.0f), dout = random_bf16(std::size_t(n), rng);
    std::vector<float> ref(static_cast<std::size_t>(n));
    ops::gelu_backward(ref.data(), x.f.data(), dout.f.data(), n);

    GpuBuffer<std::uint16_t> in(std::size_t(n) + 8), d(std::size_t(n) + 8);
    upload_at(in, std::size_t(off), x.bits);
    upload_at(d, std::size_t(off), dout.bits);
    Stream s;
    cuda::gelu_backward(d.get() + off, in.get() + off, d.get() + off, n, s);
    s.sync();
    EXPECT_TRUE(all_close(widen(download_at(d, std::size_t(off), std::size_t(n))), ref, kBf16Rtol, 1e-3));
}

TEST_P(CudaPointwise, AddIsTheFloatSumRoundedOnce) {
    FP8SCOPE_REQUIRE_GPU();
    const auto [n, off] = GetParam();
    std::mt19937 rng(43);
    const Bf16Data a = random_bf16(std::size_t(n), rng, -3.0f, 3.0f), b = random_bf16(std::size_t(n), rng, -0.01f, 0.01f);
    std::vector<float> ref(static_cast<std::size_t>(n));
    for (std::size_t i = 0; i < ref.size(); ++i) ref[i] = a.f[i] + b.f[i];

    GpuBuffer<std::uint16_t> da(std::size_t(n) + 8), db(std::size_t(n) + 8), out(std::size_t(n) + 8);
    upload_at(da, std::size_t(off), a.bits);
    upload_at(db, std::size_t(off), b.bits);
    Stream s;
    cuda::add(out.get() + off, da.get() + off, db.get() + off, n, s);
    cuda::add(da.get() + off, da.get() + off, db.get() + off, n, s);  // in place: a += b
    s.sync();
    EXPECT_TRUE(same_bits(download_at(out, std::size_t(off), std::size_t(n)), narrow(ref)));
    EXPECT_TRUE(same_bits(download_at(da, std::size_t(off), std::size_t(n)), narrow(ref))) << "in place";
}

TEST_P(CudaPointwise, ScaleIsTheFloatProduct) {
    FP8SCOPE_REQUIRE_GPU();
    const auto [n, off] = GetParam();
    std::mt19937 rng(44);
    const auto x = random_f32(std::size_t(n), rng, -100.0f, 100.0f);
    const float factor = 0.3701f;
    std::vector<float> ref(x);
    for (float& v : ref) v *= factor;

    GpuBuffer<float> d(std::size_t(n) + 8);
    upload_at(d, std::size_t(off), x);
    Stream s;
    cuda::scale(d.get() + off, factor, n, s);
    s.sync();
    EXPECT_TRUE(same_bits(download_at(d, std::size_t(off), std::size_t(n)), ref));
}

INSTANTIATE_TEST_SUITE_P(Sizes, CudaPointwise,
                         ::testing::Values(Span{1000, 0}, Span{1000, 1}, Span{8, 0}, Span{7, 0}, Span{4099, 0},
                                           Span{4099, 1}));

// --- SwiGLU, its Smooth-SwiGLU scales and the column scaling -------------------------------

struct RowsCols {
    std::int64_t N;
    int H;
};

class CudaSwiGlu : public ::testing::TestWithParam<RowsCols> {};

TEST_P(CudaSwiGlu, Forward) {
    FP8SCOPE_REQUIRE_GPU();
    const auto [N, H] = GetParam();
    std::mt19937 rng(51);
    const Bf16Data inp = random_bf16(std::size_t(N) * 2 * H, rng, -4.0f, 4.0f);
    std::vector<float> ref(std::size_t(N) * H);
    ops::swiglu_forward(ref.data(), inp.f.data(), N, H);

    GpuBuffer<std::uint16_t> d_inp(inp.bits), out(ref.size());
    Stream s;
    cuda::swiglu_forward(out.get(), d_inp.get(), N, H, s);
    s.sync();
    EXPECT_TRUE(all_close(widen(out.download()), ref, kBf16Rtol, 1e-3));
}

TEST_P(CudaSwiGlu, Backward) {
    FP8SCOPE_REQUIRE_GPU();
    const auto [N, H] = GetParam();
    std::mt19937 rng(52);
    const Bf16Data inp = random_bf16(std::size_t(N) * 2 * H, rng, -4.0f, 4.0f);
    const Bf16Data dout = random_bf16(std::size_t(N) * H, rng);
    std::vector<float> ref(inp.f.size());
    ops::swiglu_backward(ref.data(), inp.f.data(), dout.f.data(), N, H);

    GpuBuffer<std::uint16_t> d_inp(inp.bits), d_dout(dout.bits), dinp(ref.size());
    Stream s;
    cuda::swiglu_backward(dinp.get(), d_inp.get(), d_dout.get(), N, H, s);
    s.sync();
    EXPECT_TRUE(all_close(widen(dinp.download()), ref, kBf16Rtol, 1e-3));
}

// Channels of very different magnitudes, and the edge cases: an all-zero channel (scale
// 1), a NaN (ignored), an Inf (scale 1), subnormal values and values near the float32
// maximum (the clamp to 2^+-126).
TEST_P(CudaSwiGlu, SmoothScalesAreTheCpusBitwise) {
    FP8SCOPE_REQUIRE_GPU();
    const auto [N, H] = GetParam();
    std::mt19937 rng(53);
    Bf16Data h = random_bf16(std::size_t(N) * H, rng);
    for (std::int64_t n = 0; n < N; ++n)
        for (int j = 0; j < H; ++j) {
            std::uint16_t& b = h.bits[std::size_t(n) * H + j];
            b = float_to_bf16(bf16_to_float(b) * std::ldexp(1.0f, j % 24 - 12));
            if (j == 0) b = 0;
            if (j == 1 && n == 0) b = 0x7fc0;       // NaN
            if (j == 2 && n == N - 1) b = 0x7f80;   // +Inf
            if (j == 3) b = std::uint16_t(1 + n % 100);  // subnormal
            if (j == 4) b = std::uint16_t(0xff00 - n % 50);  // about -1.7e38
        }
    h.f = widen(h.bits);
    std::vector<float> ref(static_cast<std::size_t>(H));
    ops::smooth_swiglu_scales(ref.data(), h.f.data(), N, H);

    GpuBuffer<std::uint16_t> d_h(h.bits);
    GpuBuffer<float> scales(static_cast<std::size_t>(H));
    Stream s;
    cuda::smooth_swiglu_scales(scales.get(), d_h.get(), N, H, s);
    s.sync();
    EXPECT_TRUE(same_bits(scales.download(), ref));
}

// Any scales (not only powers of two): the product or the IEEE quotient, rounded once.
TEST_P(CudaSwiGlu, ScaleColumnsIsTheCpusBitwise) {
    FP8SCOPE_REQUIRE_GPU();
    const auto [rows, cols] = GetParam();
    std::mt19937 rng(54);
    const Bf16Data x = random_bf16(std::size_t(rows) * cols, rng, -5.0f, 5.0f);
    const auto xf = random_f32(x.f.size(), rng, -5.0f, 5.0f);
    const auto sc = random_f32(std::size_t(cols), rng, 0.3f, 3.0f);
    GpuBuffer<float> d_s(sc);
    Stream s;
    for (bool inverse : {false, true}) {
        std::vector<float> ref(x.f.size()), ref_f(x.f.size());
        for (std::size_t i = 0; i < ref.size(); ++i) {
            const float f = sc[i % std::size_t(cols)];
            ref[i] = inverse ? x.f[i] / f : x.f[i] * f;
            ref_f[i] = inverse ? xf[i] / f : xf[i] * f;
        }
        GpuBuffer<std::uint16_t> in(x.bits), out(x.bits.size());
        GpuBuffer<float> in_f(xf), out_f(xf.size());
        cuda::scale_columns(out.get(), in.get(), d_s.get(), inverse, rows, cols, s);
        cuda::scale_columns(in.get(), in.get(), d_s.get(), inverse, rows, cols, s);  // in place
        cuda::scale_columns(out_f.get(), in_f.get(), d_s.get(), inverse, rows, cols, s);
        s.sync();
        EXPECT_TRUE(same_bits(out.download(), narrow(ref))) << "bf16, inverse " << inverse;
        EXPECT_TRUE(same_bits(in.download(), narrow(ref))) << "bf16 in place, inverse " << inverse;
        EXPECT_TRUE(same_bits(out_f.download(), ref_f)) << "f32, inverse " << inverse;
    }
}

INSTANTIATE_TEST_SUITE_P(Shapes, CudaSwiGlu,
                         ::testing::Values(RowsCols{51, 40}, RowsCols{51, 37}, RowsCols{16, 768}, RowsCols{3, 8},
                                           RowsCols{300, 72}, RowsCols{1100, 264}, RowsCols{1030, 35}));

// --- bias gradient -------------------------------------------------------------------------

class CudaBiasBackward : public ::testing::TestWithParam<RowsCols> {};

// Column sums of BF16 and of float32 dout; a second run gives the same bits.
TEST_P(CudaBiasBackward, MatchesCpuAndRepeats) {
    FP8SCOPE_REQUIRE_GPU();
    const auto [N, M] = GetParam();
    std::mt19937 rng(61);
    const Bf16Data dout = random_bf16(std::size_t(N) * M, rng);
    const auto dout_f = random_f32(dout.f.size(), rng);
    std::vector<float> ref(static_cast<std::size_t>(M)), ref_f(static_cast<std::size_t>(M));
    ops::bias_backward(ref.data(), dout.f.data(), N, M);
    ops::bias_backward(ref_f.data(), dout_f.data(), N, M);

    GpuBuffer<std::uint16_t> d_dout(dout.bits);
    GpuBuffer<float> d_dout_f(dout_f), dbias(static_cast<std::size_t>(M)), dbias_f(static_cast<std::size_t>(M));
    Scratch ws(cuda::bias_backward_workspace(N, M));
    Stream s;
    cuda::bias_backward(dbias.get(), d_dout.get(), N, M, ws.ws(), s);
    cuda::bias_backward(dbias_f.get(), d_dout_f.get(), N, M, ws.ws(), s);
    s.sync();
    const auto got = dbias.download(), got_f = dbias_f.download();
    EXPECT_TRUE(all_close(got, ref, 0, 1e-5)) << "bf16 dout";
    EXPECT_TRUE(all_close(got_f, ref_f, 0, 1e-5)) << "f32 dout";
    cuda::bias_backward(dbias.get(), d_dout.get(), N, M, ws.ws(), s);
    s.sync();
    EXPECT_TRUE(same_bits(dbias.download(), got)) << "second run";
}

INSTANTIATE_TEST_SUITE_P(Shapes, CudaBiasBackward,
                         ::testing::Values(RowsCols{51, 40}, RowsCols{300, 37}, RowsCols{1000, 768}, RowsCols{64, 8},
                                           RowsCols{129, 1}));

// --- softmax cross-entropy -----------------------------------------------------------------

struct Vocab {
    std::int64_t N;
    int V;
};

class CudaSoftmaxCe : public ::testing::TestWithParam<Vocab> {};

std::vector<std::int32_t> random_targets(std::int64_t N, int V, std::mt19937& rng) {
    std::uniform_int_distribution<int> dist(0, V - 1);
    std::vector<std::int32_t> t(std::size_t(N), 0);
    for (auto& x : t) x = dist(rng);
    return t;
}

// Probabilities and losses against the CPU; in place (probs over logits) gives the same bits.
TEST_P(CudaSoftmaxCe, Forward) {
    FP8SCOPE_REQUIRE_GPU();
    const auto [N, V] = GetParam();
    std::mt19937 rng(71);
    const Bf16Data logits = random_bf16(std::size_t(N) * V, rng, -8.0f, 8.0f);
    const auto targets = random_targets(N, V, rng);
    std::vector<float> ref_probs(logits.f.size()), ref_losses(static_cast<std::size_t>(N));
    const float ref_mean = ops::softmax_ce_forward(ref_probs.data(), ref_losses.data(), logits.f.data(),
                                                   targets.data(), N, V);

    GpuBuffer<std::uint16_t> d_logits(logits.bits), probs(logits.bits.size());
    GpuBuffer<std::int32_t> d_targets(targets);
    GpuBuffer<float> losses(static_cast<std::size_t>(N)), losses2(static_cast<std::size_t>(N)), mean(1);
    Stream s;
    cuda::softmax_ce_forward(probs.get(), losses.get(), d_logits.get(), d_targets.get(), N, V, s);
    cuda::mean_loss(mean.get(), losses.get(), N, s);
    s.sync();
    const Bits got = probs.download();
    EXPECT_TRUE(all_close(widen(got), ref_probs, kBf16Rtol, 1e-6)) << "probs";
    const auto got_losses = losses.download();
    EXPECT_TRUE(all_close(got_losses, ref_losses, 1e-4, 0)) << "losses";
    EXPECT_NEAR(mean.download()[0], ref_mean, 1e-4 * std::fabs(ref_mean)) << "mean loss";

    cuda::softmax_ce_forward(d_logits.get(), losses2.get(), d_logits.get(), d_targets.get(), N, V, s);
    s.sync();
    EXPECT_TRUE(same_bits(d_logits.download(), got)) << "in place";
    EXPECT_TRUE(same_bits(losses2.download(), got_losses)) << "losses in place";
}

// (probs - onehot) / N with the CPU's float operations: bitwise, in place or not.
TEST_P(CudaSoftmaxCe, BackwardIsTheCpusBitwise) {
    FP8SCOPE_REQUIRE_GPU();
    const auto [N, V] = GetParam();
    std::mt19937 rng(72);
    const Bf16Data probs = random_bf16(std::size_t(N) * V, rng, 0.0f, 0.05f);
    const auto targets = random_targets(N, V, rng);
    std::vector<float> ref(probs.f.size());
    ops::softmax_ce_backward(ref.data(), probs.f.data(), targets.data(), N, V);

    GpuBuffer<std::uint16_t> d_probs(probs.bits), dlogits(probs.bits.size());
    GpuBuffer<std::int32_t> d_targets(targets);
    Stream s;
    cuda::softmax_ce_backward(dlogits.get(), d_probs.get(), d_targets.get(), N, V, s);
    cuda::softmax_ce_backward(d_probs.get(), d_probs.get(), d_targets.get(), N, V, s);
    s.sync();
    EXPECT_TRUE(same_bits(dlogits.download(), narrow(ref)));
    EXPECT_TRUE(same_bits(d_probs.download(), narrow(ref))) << "in place";
}

INSTANTIATE_TEST_SUITE_P(Shapes, CudaSoftmaxCe,
                         ::testing::Values(Vocab{51, 257}, Vocab{37, 4104}, Vocab{4, 40}, Vocab{8, 50304},
                                           Vocab{3, 7}, Vocab{3, 65536}));  // the last: beyond shared memory

}  // namespace
}  // namespace fp8scope
