// Causal attention on the GPU (kernels/cuda/ops/ops.h: the fused kernels for head sizes 64 and
// 128, padded heads below 128, the cuBLAS path above) against the CPU ops (kernels/cpu/ops/attention.h) on
// BF16-rounded inputs, over sequence lengths that are not multiples of the tiles (17, 100,
// 257, 777: partial query and key tiles, several tiles, the diagonal inside a tile), several
// heads and a batch of 3.
//
// Tolerances, from BF16 storage: an output rounded to BF16 is within 2^-9 of its float32
// value (rtol 2^-7 leaves a factor 4 for float32 noise). Inside, the GPU rounds to BF16 the
// probabilities P before the P V and P^T dO products, dS before dQ and dK, and (fused
// path) reads the output O in BF16 for rowsum(dO * O): each a relative error <= 2^-9 per
// term of sums whose terms have random signs, which shows as an absolute error of a few
// 2^-9 of the output's scale (seen: up to 5e-3 max|ref| in an emulation of the kernels);
// hence an absolute floor of 1e-2 max|ref|. The logsumexp is float32 throughout (the fast
// exp2 and log2 are within ~2^-22): 1e-5.
#include <cstring>
#include <random>

#include "cpu/ops/attention.h"
#include "cuda/cuda_backend.h"
#include "test_cuda_ops.h"

namespace fp8scope {
namespace {

using testing::Bf16Data;
using testing::Bits;
using testing::all_close;
using testing::GpuBuffer;
using testing::random_bf16;
using testing::same_bits;
using testing::Scratch;
using testing::Stream;
using testing::widen;

constexpr double kBf16Rtol = 1.0 / 128;
constexpr double kScaleTol = 1e-2;  // of max|ref|, for sums of BF16-rounded terms (above)
constexpr double kLseTol = 1e-5;

struct AttShape {
    int B, T, C, NH;
    int ws_rows = 0;  // > 0: the workspace the ops ask for this many batch rows (fewer pairs per call)
};

void PrintTo(const AttShape& s, std::ostream* os) {
    *os << "B=" << s.B << " T=" << s.T << " C=" << s.C << " NH=" << s.NH << " (hs " << s.C / s.NH << ")";
    if (s.ws_rows > 0) *os << ", workspace of " << s.ws_rows << " batch rows";
}

class CudaAttention : public ::testing::TestWithParam<AttShape> {};

// The q, k or v part (0, 1, 2) of a (B*T, 3C) tensor.
std::vector<float> part(const std::vector<float>& qkv, int rows, int C, int which) {
    std::vector<float> out(std::size_t(rows) * C);
    for (int r = 0; r < rows; ++r)
        for (int c = 0; c < C; ++c)
            out[std::size_t(r) * C + c] = qkv[std::size_t(r) * 3 * C + std::size_t(which) * C + c];
    return out;
}

// L (B,NH,T) = ln sum_{t2<=t} exp(q_t . k_t2 / sqrt(hs)), in double.
std::vector<float> reference_lse(const std::vector<float>& qkv, int B, int T, int C, int NH) {
    const int hs = C / NH;
    const std::size_t C3 = 3 * std::size_t(C);
    const double scale = 1.0 / std::sqrt(double(hs));
    std::vector<float> lse(std::size_t(B) * NH * T);
    std::vector<double> s(static_cast<std::size_t>(T));
    for (int b = 0; b < B; ++b)
        for (int h = 0; h < NH; ++h)
            for (int t = 0; t < T; ++t) {
                const float* q = qkv.data() + (std::size_t(b) * T + t) * C3 + std::size_t(h) * hs;
                double mx = -INFINITY;
                for (int j = 0; j <= t; ++j) {
                    const float* k = qkv.data() + (std::size_t(b) * T + j) * C3 + C + std::size_t(h) * hs;
                    double d = 0;
                    for (int i = 0; i < hs; ++i) d += double(q[i]) * k[i];
                    s[std::size_t(j)] = d * scale;
                    mx = std::max(mx, s[std::size_t(j)]);
                }
                double sum = 0;
                for (int j = 0; j <= t; ++j) sum += std::exp(s[std::size_t(j)] - mx);
                lse[(std::size_t(b) * NH + h) * T + t] = float(mx + std::log(sum));
            }
    return lse;
}

// The logsumexp in a downloaded att (cudaMalloc'd, so 4-byte aligned: L starts at att[0]).
std::vector<float> saved_lse(const Bits& att, int B, int T, int NH) {
    std::vector<float> lse(std::size_t(B) * NH * T);
    std::memcpy(lse.data(), att.data(), lse.size() * sizeof(float));
    return lse;
}

std::size_t workspace_bytes(int B, int T, int C, int NH) {
    return std::max(cuda::attention_forward_workspace(B, T, C, NH, NH), cuda::attention_backward_workspace(B, T, C, NH, NH));
}

TEST_P(CudaAttention, ForwardMatchesCpu) {
    FP8SCOPE_REQUIRE_GPU();
    const auto [B, T, C, NH, ws_rows] = GetParam();
    std::mt19937 rng(31);
    const Bf16Data qkv = random_bf16(std::size_t(B) * T * 3 * C, rng, -2.0f, 2.0f);
    const std::size_t saved = std::size_t(cuda::attention_saved(B, T, NH));
    ASSERT_GE(saved, 2 * std::size_t(B) * NH * T);
    ASSERT_EQ(saved % 8, 0u);
    std::vector<float> ref_out(std::size_t(B) * T * C), ref_att(std::size_t(B) * NH * T * T);
    ops::attention_forward(ref_out.data(), ref_att.data(), qkv.f.data(), B, T, C, NH, NH);

    GpuBuffer<std::uint16_t> d_qkv(qkv.bits), out(ref_out.size()), att(saved);
    Scratch ws(workspace_bytes(ws_rows > 0 ? ws_rows : B, T, C, NH));
    Stream s;
    cuda::attention_forward(out.get(), att.get(), d_qkv.get(), B, T, C, NH, NH, ws.ws(), s);
    s.sync();
    const Bits got = out.download(), got_att = att.download();
    EXPECT_TRUE(all_close(widen(got), ref_out, kBf16Rtol, kScaleTol)) << "out";
    EXPECT_TRUE(all_close(saved_lse(got_att, B, T, NH), reference_lse(qkv.f, B, T, C, NH), kLseTol, kLseTol))
        << "logsumexp";

    cuda::attention_forward(out.get(), att.get(), d_qkv.get(), B, T, C, NH, NH, ws.ws(), s);
    s.sync();
    EXPECT_TRUE(same_bits(out.download(), got)) << "out, second run";
    EXPECT_TRUE(same_bits(att.download(), got_att)) << "att, second run";
}

// The CPU backward differentiates its own float32 forward; the GPU's recomputes P from
// the saved logsumexp. dqkv starts as NaN: every element must be written. A second run
// gives the same bits, and so does a backward without the forward's output (the fused
// path recomputes it; the cuBLAS path does not read it).
TEST_P(CudaAttention, BackwardMatchesCpuAndIsDeterministic) {
    FP8SCOPE_REQUIRE_GPU();
    const auto [B, T, C, NH, ws_rows] = GetParam();
    std::mt19937 rng(32);
    const Bf16Data qkv = random_bf16(std::size_t(B) * T * 3 * C, rng, -2.0f, 2.0f);
    const Bf16Data dout = random_bf16(std::size_t(B) * T * C, rng);
    std::vector<float> ref_out(std::size_t(B) * T * C), ref_att(std::size_t(B) * NH * T * T), ref(qkv.f.size());
    ops::attention_forward(ref_out.data(), ref_att.data(), qkv.f.data(), B, T, C, NH, NH);
    ops::attention_backward(ref.data(), dout.f.data(), qkv.f.data(), ref_att.data(), B, T, C, NH, NH);

    const Bits nan(qkv.bits.size(), 0x7FC0);
    GpuBuffer<std::uint16_t> d_qkv(qkv.bits), out(dout.bits.size()), att(std::size_t(cuda::attention_saved(B, T, NH))),
        d_dout(dout.bits), dqkv(nan);
    Scratch ws(workspace_bytes(ws_rows > 0 ? ws_rows : B, T, C, NH));
    Stream s;
    cuda::attention_forward(out.get(), att.get(), d_qkv.get(), B, T, C, NH, NH, ws.ws(), s);
    cuda::attention_backward(dqkv.get(), d_dout.get(), d_qkv.get(), out.get(), att.get(), B, T, C, NH, NH, ws.ws(), s);
    s.sync();
    const Bits got = dqkv.download();
    const auto got_f = widen(got);
    const char* names[] = {"dq", "dk", "dv"};
    for (int which = 0; which < 3; ++which)
        EXPECT_TRUE(all_close(part(got_f, B * T, C, which), part(ref, B * T, C, which), kBf16Rtol, kScaleTol))
            << names[which];

    dqkv.upload(nan);
    cuda::attention_backward(dqkv.get(), d_dout.get(), d_qkv.get(), out.get(), att.get(), B, T, C, NH, NH, ws.ws(), s);
    s.sync();
    EXPECT_TRUE(same_bits(dqkv.download(), got)) << "dqkv, second run";

    dqkv.upload(nan);
    cuda::attention_backward(dqkv.get(), d_dout.get(), d_qkv.get(), nullptr, att.get(), B, T, C, NH, NH, ws.ws(), s);
    s.sync();
    EXPECT_TRUE(same_bits(dqkv.download(), got)) << "dqkv, without the forward's output";
}

// Fused: hs 128 and 64 at T = 17 (one partial tile), 100, 257 (several, partial last),
// 777 (many); padded to 64: hs 10 (unaligned heads), 48, 32 (more batch rows than heads
// too); padded to 128: hs 96; cuBLAS (hs above 128) along the heads: hs 160, along the
// batch rows (more rows than heads): hs 160 and 136, and hs 160 with the workspace of 2
// batch rows (calls of 2, 2 and 1 rows).
INSTANTIATE_TEST_SUITE_P(
    Shapes, CudaAttention,
    ::testing::Values(AttShape{3, 17, 256, 2}, AttShape{3, 100, 256, 2}, AttShape{3, 257, 384, 3},
                      AttShape{1, 777, 256, 2}, AttShape{3, 17, 192, 3}, AttShape{3, 100, 128, 2},
                      AttShape{3, 257, 192, 3}, AttShape{3, 17, 40, 4}, AttShape{3, 100, 40, 4},
                      AttShape{2, 33, 96, 2}, AttShape{2, 128, 128, 4}, AttShape{6, 17, 40, 4},
                      AttShape{5, 65, 64, 2}, AttShape{2, 70, 192, 2}, AttShape{2, 33, 320, 2},
                      AttShape{5, 33, 320, 2}, AttShape{3, 17, 272, 2}, AttShape{5, 33, 320, 2, 2}));

TEST(CudaAttentionChecks, RefusesASmallWorkspaceAndUnevenHeads) {
    FP8SCOPE_REQUIRE_GPU();
    for (const int C : {16, 128}) {  // hs 8 (padded) and 64 (fused)
        const int B = 1, T = 8, NH = 2;
        GpuBuffer<std::uint16_t> qkv(std::size_t(B) * T * 3 * C), out(std::size_t(B) * T * C),
            dqkv(std::size_t(B) * T * 3 * C), att(std::size_t(cuda::attention_saved(B, T, NH)));
        Scratch ws(workspace_bytes(B, T, C, NH));
        const std::size_t need = C == 16 ? 16 : cuda::attention_backward_workspace(B, T, C, NH, NH) - 1;
        const cuda::Workspace small{ws.buf.get(), need};
        if (C == 16) {  // the padded forward needs one, the fused none
            EXPECT_THROW(cuda::attention_forward(out.get(), att.get(), qkv.get(), B, T, C, NH, NH, small, nullptr),
                         std::invalid_argument);
        }
        EXPECT_THROW(cuda::attention_backward(dqkv.get(), out.get(), qkv.get(), nullptr, att.get(), B, T, C, NH,
                                              NH, small, nullptr),
                     std::invalid_argument);
        EXPECT_THROW(cuda::attention_forward(out.get(), att.get(), qkv.get(), B, T, C, 3, 3, ws.ws(), nullptr),
                     std::invalid_argument);
    }
}

// Through the backend: att sized by attention_saved, the forward's output handed to
// backward: the same bits as the ops called directly.
TEST(CudaAttentionBackend, BackwardUsesTheForwardsOutput) {
    FP8SCOPE_REQUIRE_GPU();
    const int B = 2, T = 70, C = 128, NH = 2;
    std::mt19937 rng(33);
    const Bf16Data qkv = random_bf16(std::size_t(B) * T * 3 * C, rng, -2.0f, 2.0f);
    const Bf16Data dout = random_bf16(std::size_t(B) * T * C, rng);
    CudaBackend gpu;
    const std::size_t saved = std::size_t(gpu.attention_saved(B, T, NH));
    const std::size_t n_qkv = qkv.bits.size(), n_out = dout.bits.size();
    auto* mem = static_cast<std::uint16_t*>(gpu.allocate(2 * (2 * n_qkv + 2 * n_out + saved)));
    std::uint16_t *b_qkv = mem, *b_dqkv = b_qkv + n_qkv, *b_out = b_dqkv + n_qkv, *b_dout = b_out + n_out,
                  *b_att = b_dout + n_out;
    gpu.copy_from_host(b_qkv, qkv.bits.data(), 2 * n_qkv);
    gpu.copy_from_host(b_dout, dout.bits.data(), 2 * n_out);
    auto act = [](std::uint16_t* p) { return ActPtr{reinterpret_cast<std::byte*>(p), DType::BF16}; };
    gpu.attention_forward(act(b_out), act(b_att), act(b_qkv), B, T, C, NH, NH);
    gpu.attention_backward(act(b_dqkv), act(b_dout), act(b_qkv), act(b_out), act(b_att), B, T, C, NH, NH);
    Bits got(n_qkv);
    gpu.copy_to_host(got.data(), b_dqkv, 2 * n_qkv);
    gpu.synchronize();

    GpuBuffer<std::uint16_t> d_qkv(qkv.bits), out(n_out), att(saved), d_dout(dout.bits), dqkv(n_qkv);
    Scratch ws(workspace_bytes(B, T, C, NH));
    Stream s;
    cuda::attention_forward(out.get(), att.get(), d_qkv.get(), B, T, C, NH, NH, ws.ws(), s);
    cuda::attention_backward(dqkv.get(), d_dout.get(), d_qkv.get(), out.get(), att.get(), B, T, C, NH, NH, ws.ws(), s);
    s.sync();
    EXPECT_TRUE(same_bits(got, dqkv.download()));
    gpu.release(mem);
}

}  // namespace
}  // namespace fp8scope
