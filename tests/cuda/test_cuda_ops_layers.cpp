// The embedding and the norms on the GPU (kernels/cuda/ops/ops.h) against the CPU ops
// (kernels/cpu/ops) on random data of awkward shapes: rows not a multiple of 32, channels
// not a multiple of 8 (the unpacked path). Attention: test_cuda_attention.cpp.
// Tolerances follow from BF16 storage: a BF16 value is within 2^-8 (relative) of the
// float32 it rounds, so a BF16 output gets rtol 2^-7 (the rounding plus float32 noise)
// and an absolute floor of a fraction of the output's scale for values that cancel;
// float32 outputs from the same inputs (statistics, parameter gradients) get 1e-5.
#include <random>

#include "cpu/ops/embedding.h"
#include "cpu/ops/norm.h"
#include "test_cuda_ops.h"

namespace fp8scope {
namespace {

using testing::Bf16Data;
using testing::Bits;
using testing::all_close;
using testing::GpuBuffer;
using testing::random_bf16;
using testing::random_f32;
using testing::same_bits;
using testing::Scratch;
using testing::Stream;
using testing::widen;

constexpr double kBf16Rtol = 1.0 / 128;  // BF16 rounding (<= 2^-8) with a factor 2 to spare

// --- embedding ---------------------------------------------------------------------------

struct EmbShape {
    int B, T, C, V;
};

class CudaEmbedding : public ::testing::TestWithParam<EmbShape> {};

std::vector<std::int32_t> random_tokens(std::size_t n, int V, std::mt19937& rng) {
    std::uniform_int_distribution<int> dist(0, V - 1);
    std::vector<std::int32_t> t(n);
    for (auto& x : t) x = dist(rng);
    return t;
}

TEST_P(CudaEmbedding, ForwardIsTheCpuSumRoundedOnce) {
    FP8SCOPE_REQUIRE_GPU();
    const auto [B, T, C, V] = GetParam();
    const std::size_t N = std::size_t(B) * T;
    std::mt19937 rng(11);
    const auto tokens = random_tokens(N, V, rng);
    const auto wte = random_f32(std::size_t(V) * C, rng), wpe = random_f32(std::size_t(T) * C, rng);
    std::vector<float> ref(N * C);
    ops::embedding_forward(ref.data(), tokens.data(), wte.data(), wpe.data(), B, T, C);

    GpuBuffer<std::int32_t> d_tokens(tokens);
    GpuBuffer<float> d_wte(wte), d_wpe(wpe);
    GpuBuffer<std::uint16_t> out(N * C);
    Stream s;
    cuda::embedding_forward(out.get(), d_tokens.get(), d_wte.get(), d_wpe.get(), B, T, C, s);
    s.sync();
    EXPECT_TRUE(same_bits(out.download(), testing::narrow(ref)));
}

// dwte, dwpe accumulate onto earlier values, in position order: bitwise the CPU's, and
// the same on a second run (tokens repeat, so an unordered sum would show).
TEST_P(CudaEmbedding, BackwardIsTheCpuScatterBitwise) {
    FP8SCOPE_REQUIRE_GPU();
    const auto [B, T, C, V] = GetParam();
    const std::size_t N = std::size_t(B) * T;
    std::mt19937 rng(12);
    const auto tokens = random_tokens(N, V, rng);
    const Bf16Data dout = random_bf16(N * C, rng);
    const auto dwte0 = random_f32(std::size_t(V) * C, rng), dwpe0 = random_f32(std::size_t(T) * C, rng);
    auto ref_wte = dwte0, ref_wpe = dwpe0;
    ops::embedding_backward(ref_wte.data(), ref_wpe.data(), dout.f.data(), tokens.data(), B, T, C);

    GpuBuffer<std::int32_t> d_tokens(tokens);
    GpuBuffer<std::uint16_t> d_dout(dout.bits);
    GpuBuffer<float> dwte(dwte0), dwpe(dwpe0);
    Scratch ws(cuda::embedding_backward_workspace(B, T));
    Stream s;
    cuda::embedding_backward(dwte.get(), dwpe.get(), d_dout.get(), d_tokens.get(), B, T, C, ws.ws(), s);
    s.sync();
    const auto got_wte = dwte.download(), got_wpe = dwpe.download();
    EXPECT_TRUE(same_bits(got_wte, ref_wte)) << "dwte";
    EXPECT_TRUE(same_bits(got_wpe, ref_wpe)) << "dwpe";

    dwte.upload(dwte0);
    dwpe.upload(dwpe0);
    cuda::embedding_backward(dwte.get(), dwpe.get(), d_dout.get(), d_tokens.get(), B, T, C, ws.ws(), s);
    s.sync();
    EXPECT_TRUE(same_bits(dwte.download(), got_wte)) << "dwte, second run";
    EXPECT_TRUE(same_bits(dwpe.download(), got_wpe)) << "dwpe, second run";
}

INSTANTIATE_TEST_SUITE_P(Shapes, CudaEmbedding,
                         ::testing::Values(EmbShape{3, 17, 40, 11}, EmbShape{2, 64, 768, 257},
                                           EmbShape{2, 9, 37, 5}, EmbShape{4, 32, 64, 3}));

// --- LayerNorm and RMSNorm -------------------------------------------------------------------

struct NormShape {
    std::int64_t N;
    int C;
};

class CudaNorm : public ::testing::TestWithParam<NormShape> {};

struct NormData {
    Bf16Data x, dout, dinp0;
    std::vector<float> w, b;
};

NormData norm_data(std::int64_t N, int C, unsigned seed) {
    std::mt19937 rng(seed);
    NormData d;
    d.x = random_bf16(std::size_t(N) * C, rng, -1.5f, 2.5f);  // a mean away from zero
    d.dout = random_bf16(std::size_t(N) * C, rng);
    d.dinp0 = random_bf16(std::size_t(N) * C, rng);
    d.w = random_f32(std::size_t(C), rng, 0.5f, 1.5f);
    d.b = random_f32(std::size_t(C), rng, -0.5f, 0.5f);
    return d;
}

TEST_P(CudaNorm, LayerNormForward) {
    FP8SCOPE_REQUIRE_GPU();
    const auto [N, C] = GetParam();
    const NormData d = norm_data(N, C, 21);
    std::vector<float> ref(std::size_t(N) * C), ref_mean(static_cast<std::size_t>(N)), ref_rstd(static_cast<std::size_t>(N));
    ops::layernorm_forward(ref.data(), ref_mean.data(), ref_rstd.data(), d.x.f.data(), d.w.data(), d.b.data(), N, C);

    GpuBuffer<std::uint16_t> x(d.x.bits), out(ref.size());
    GpuBuffer<float> w(d.w), b(d.b), mean(static_cast<std::size_t>(N)), rstd(static_cast<std::size_t>(N));
    Stream s;
    cuda::layernorm_forward(out.get(), mean.get(), rstd.get(), x.get(), w.get(), b.get(), N, C, s);
    s.sync();
    EXPECT_TRUE(all_close(widen(out.download()), ref, kBf16Rtol, 1e-3)) << "out";
    EXPECT_TRUE(all_close(mean.download(), ref_mean, 0, 1e-5)) << "mean";
    EXPECT_TRUE(all_close(rstd.download(), ref_rstd, 1e-5, 0)) << "rstd";
}

TEST_P(CudaNorm, RmsNormForward) {
    FP8SCOPE_REQUIRE_GPU();
    const auto [N, C] = GetParam();
    const NormData d = norm_data(N, C, 22);
    std::vector<float> ref(std::size_t(N) * C), ref_rstd(static_cast<std::size_t>(N));
    ops::rmsnorm_forward(ref.data(), ref_rstd.data(), d.x.f.data(), d.w.data(), N, C);

    GpuBuffer<std::uint16_t> x(d.x.bits), out(ref.size());
    GpuBuffer<float> w(d.w), rstd(static_cast<std::size_t>(N));
    Stream s;
    cuda::rmsnorm_forward(out.get(), rstd.get(), x.get(), w.get(), N, C, s);
    s.sync();
    const Bits got = out.download();
    EXPECT_TRUE(all_close(widen(got), ref, kBf16Rtol, 1e-3)) << "out";
    EXPECT_TRUE(all_close(rstd.download(), ref_rstd, 1e-5, 0)) << "rstd";
    // LayerNorm without mean and bias is RMSNorm (Backend::layernorm_forward's convention)
    GpuBuffer<std::uint16_t> out2(ref.size());
    cuda::layernorm_forward(out2.get(), nullptr, rstd.get(), x.get(), w.get(), nullptr, N, C, s);
    s.sync();
    EXPECT_TRUE(same_bits(out2.download(), got)) << "layernorm_forward without mean";
}

// Backward adds into dinp and overwrites dweight, dbias; both sides use the CPU's
// statistics. A second run from the same dinp gives the same bits.
TEST_P(CudaNorm, LayerNormBackward) {
    FP8SCOPE_REQUIRE_GPU();
    const auto [N, C] = GetParam();
    const NormData d = norm_data(N, C, 23);
    const std::size_t NC = std::size_t(N) * C;
    std::vector<float> y(NC), mean(static_cast<std::size_t>(N)), rstd(static_cast<std::size_t>(N));
    ops::layernorm_forward(y.data(), mean.data(), rstd.data(), d.x.f.data(), d.w.data(), d.b.data(), N, C);
    auto ref_dinp = d.dinp0.f;
    std::vector<float> ref_dw(static_cast<std::size_t>(C)), ref_db(static_cast<std::size_t>(C));
    ops::layernorm_backward(ref_dinp.data(), ref_dw.data(), ref_db.data(), d.dout.f.data(), d.x.f.data(), d.w.data(),
                            mean.data(), rstd.data(), N, C);

    GpuBuffer<std::uint16_t> x(d.x.bits), dout(d.dout.bits), dinp(d.dinp0.bits);
    GpuBuffer<float> w(d.w), g_mean(mean), g_rstd(rstd), dw(static_cast<std::size_t>(C)), db(static_cast<std::size_t>(C));
    Scratch ws(cuda::norm_backward_workspace(N, C));
    Stream s;
    auto run = [&] {
        dinp.upload(d.dinp0.bits);
        cuda::layernorm_backward(dinp.get(), dw.get(), db.get(), dout.get(), x.get(), w.get(), g_mean.get(),
                                 g_rstd.get(), N, C, ws.ws(), s);
        s.sync();
    };
    run();
    const Bits got_dinp = dinp.download();
    const auto got_dw = dw.download(), got_db = db.download();
    EXPECT_TRUE(all_close(widen(got_dinp), ref_dinp, kBf16Rtol, 2e-3)) << "dinp";
    EXPECT_TRUE(all_close(got_dw, ref_dw, 0, 1e-5)) << "dweight";
    EXPECT_TRUE(all_close(got_db, ref_db, 0, 1e-5)) << "dbias";
    run();
    EXPECT_TRUE(same_bits(dinp.download(), got_dinp)) << "dinp, second run";
    EXPECT_TRUE(same_bits(dw.download(), got_dw)) << "dweight, second run";
    EXPECT_TRUE(same_bits(db.download(), got_db)) << "dbias, second run";
}

TEST_P(CudaNorm, RmsNormBackward) {
    FP8SCOPE_REQUIRE_GPU();
    const auto [N, C] = GetParam();
    const NormData d = norm_data(N, C, 24);
    const std::size_t NC = std::size_t(N) * C;
    std::vector<float> y(NC), rstd(static_cast<std::size_t>(N));
    ops::rmsnorm_forward(y.data(), rstd.data(), d.x.f.data(), d.w.data(), N, C);
    auto ref_dinp = d.dinp0.f;
    std::vector<float> ref_dw(static_cast<std::size_t>(C));
    ops::rmsnorm_backward(ref_dinp.data(), ref_dw.data(), d.dout.f.data(), d.x.f.data(), d.w.data(), rstd.data(), N,
                          C);

    GpuBuffer<std::uint16_t> x(d.x.bits), dout(d.dout.bits), dinp(d.dinp0.bits);
    GpuBuffer<float> w(d.w), g_rstd(rstd), dw(static_cast<std::size_t>(C));
    Scratch ws(cuda::norm_backward_workspace(N, C));
    Stream s;
    auto run = [&] {
        dinp.upload(d.dinp0.bits);
        cuda::rmsnorm_backward(dinp.get(), dw.get(), dout.get(), x.get(), w.get(), g_rstd.get(), N, C, ws.ws(), s);
        s.sync();
    };
    run();
    const Bits got_dinp = dinp.download();
    const auto got_dw = dw.download();
    EXPECT_TRUE(all_close(widen(got_dinp), ref_dinp, kBf16Rtol, 2e-3)) << "dinp";
    EXPECT_TRUE(all_close(got_dw, ref_dw, 0, 1e-5)) << "dweight";
    run();
    EXPECT_TRUE(same_bits(dinp.download(), got_dinp)) << "dinp, second run";
    EXPECT_TRUE(same_bits(dw.download(), got_dw)) << "dweight, second run";
}

// Rows: 51 and 37 (odd), 600, 1100, 2098 and 5000 (several rows per backward block, the
// last one short in 1100 and 2098; 2098 and 5000 also several rows per forward block on
// an H100 or H200). Channels: the register path with 1 (40, 64, 768), 2 (2056: the first
// C of 2, 4096), 3 (5000) and 4 (7000, 8192: the last C) packs of 8 per thread, threads of
// 2056, 5000 and 7000 short of their last pack; the generic path packed (8200) and
// unpacked (37).
INSTANTIATE_TEST_SUITE_P(Shapes, CudaNorm,
                         ::testing::Values(NormShape{51, 40}, NormShape{128, 768}, NormShape{37, 37},
                                           NormShape{8, 4096}, NormShape{600, 64}, NormShape{1100, 40},
                                           NormShape{5, 5000}, NormShape{2098, 2056}, NormShape{5000, 64},
                                           NormShape{9, 7000}, NormShape{4, 8192}, NormShape{3, 8200}));

TEST(CudaNorm, BackwardRefusesASmallWorkspace) {
    FP8SCOPE_REQUIRE_GPU();
    const std::int64_t N = 51;
    const int C = 40;
    GpuBuffer<std::uint16_t> x(std::size_t(N) * C), dout(std::size_t(N) * C), dinp(std::size_t(N) * C);
    GpuBuffer<float> w(static_cast<std::size_t>(C)), rstd(static_cast<std::size_t>(N)), dw(static_cast<std::size_t>(C));
    Scratch ws(cuda::norm_backward_workspace(N, C) - 4);
    EXPECT_THROW(cuda::rmsnorm_backward(dinp.get(), dw.get(), dout.get(), x.get(), w.get(), rstd.get(), N, C, ws.ws(),
                                        nullptr),
                 std::invalid_argument);
}

}  // namespace
}  // namespace fp8scope
