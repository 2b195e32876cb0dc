// Grouped-query attention and rotary positions on the GPU against the CPU ops
// (kernels/cpu/ops/attention.h, rope.h) on BF16-rounded inputs: the fused kernels (head
// sizes 64 and 128; hs 16 and 24 padded to 64) and the cuBLAS path (hs 160), groups of 2
// and 4 query heads per key/value head (and 1, multi-head, through the same layout),
// sequence lengths that end in partial tiles. Tolerances as in test_cuda_attention.cpp: BF16 storage of the output
// (rtol 2^-7) and a floor of 1e-2 max|ref| for sums of BF16-rounded terms; a key/value
// head's gradient sums `group` query heads' terms, within the same floor.
#include <random>

#include "cpu/ops/attention.h"
#include "cpu/ops/rope.h"
#include "engine/model_config.h"
#include "test_cuda_ops.h"

namespace fp8scope {
namespace {

using testing::Bf16Data;
using testing::Bits;
using testing::all_close;
using testing::GpuBuffer;
using testing::narrow;
using testing::random_bf16;
using testing::same_bits;
using testing::Scratch;
using testing::Stream;
using testing::widen;

constexpr double kBf16Rtol = 1.0 / 128;
constexpr double kScaleTol = 1e-2;

struct GqaShape {
    int B, T, C, NH, NKV;
    int ws_rows = 0;  // > 0: the workspace the ops ask for this many batch rows (fewer pairs per call)
};

void PrintTo(const GqaShape& s, std::ostream* os) {
    *os << "B=" << s.B << " T=" << s.T << " C=" << s.C << " NH=" << s.NH << " NKV=" << s.NKV << " (hs "
        << s.C / s.NH << ")";
    if (s.ws_rows > 0) *os << ", workspace of " << s.ws_rows << " batch rows";
}

class CudaGqaRope : public ::testing::TestWithParam<GqaShape> {};

// Columns [from, from + width) of a (rows, W) matrix.
std::vector<float> columns(const std::vector<float>& m, int rows, int W, int from, int width) {
    std::vector<float> out(std::size_t(rows) * width);
    for (int r = 0; r < rows; ++r)
        for (int c = 0; c < width; ++c) out[std::size_t(r) * width + c] = m[std::size_t(r) * W + from + c];
    return out;
}

// The layer as the model runs it: RoPE on q and k, attention, its backward, RoPE's inverse
// on dqkv. The CPU on the BF16 values widened; the GPU rounds the rotated qkv to BF16.
TEST_P(CudaGqaRope, ForwardAndBackwardMatchCpuAndAreDeterministic) {
    FP8SCOPE_REQUIRE_GPU();
    const auto [B, T, C, NH, NKV, ws_rows_] = GetParam();
    const int hs = C / NH, W = C + 2 * NKV * hs, rows = B * T;
    std::mt19937 rng(41);
    const Bf16Data qkv = random_bf16(std::size_t(rows) * W, rng, -2.0f, 2.0f);
    const Bf16Data dout = random_bf16(std::size_t(rows) * C, rng);
    const std::vector<float> table = rope_table(T, hs, 10000.0);

    // CPU: rotate the widened BF16 values, then round them as the GPU stores them.
    std::vector<float> rotated = qkv.f;
    ops::rope(rotated.data(), table.data(), B, T, NH, NKV, hs, false);
    const Bf16Data rot{narrow(rotated), widen(narrow(rotated))};
    std::vector<float> ref_out(std::size_t(rows) * C), att(std::size_t(B) * NH * T * T), ref(rot.f.size());
    ops::attention_forward(ref_out.data(), att.data(), rot.f.data(), B, T, C, NH, NKV);
    ops::attention_backward(ref.data(), dout.f.data(), rot.f.data(), att.data(), B, T, C, NH, NKV);
    ops::rope(ref.data(), table.data(), B, T, NH, NKV, hs, true);

    GpuBuffer<float> d_table(table);
    GpuBuffer<std::uint16_t> d_qkv(qkv.bits), out(ref_out.size()), d_dout(dout.bits),
        att_gpu(std::size_t(cuda::attention_saved(B, T, NH))), dqkv(Bits(qkv.bits.size(), 0x7FC0));
    const int ws_rows = GetParam().ws_rows > 0 ? GetParam().ws_rows : B;
    Scratch ws(std::max(cuda::attention_forward_workspace(ws_rows, T, C, NH, NKV),
                        cuda::attention_backward_workspace(ws_rows, T, C, NH, NKV)));
    Stream s;
    cuda::rope(d_qkv.get(), d_table.get(), B, T, NH, NKV, hs, false, s);
    s.sync();
    const Bits rotated_gpu = d_qkv.download();
    // one BF16 rounding of the same float32 formula (a floor for the products' rounding
    // where the two terms cancel)
    EXPECT_TRUE(all_close(widen(rotated_gpu), rotated, kBf16Rtol, 1e-6)) << "rope";
    cuda::attention_forward(out.get(), att_gpu.get(), d_qkv.get(), B, T, C, NH, NKV, ws.ws(), s);
    cuda::attention_backward(dqkv.get(), d_dout.get(), d_qkv.get(), out.get(), att_gpu.get(), B, T, C, NH, NKV,
                             ws.ws(), s);
    cuda::rope(dqkv.get(), d_table.get(), B, T, NH, NKV, hs, true, s);
    s.sync();
    const Bits got_out = out.download(), got = dqkv.download();
    EXPECT_TRUE(all_close(widen(got_out), ref_out, kBf16Rtol, kScaleTol)) << "out";
    const auto got_f = widen(got);
    const int kv = NKV * hs;
    EXPECT_TRUE(all_close(columns(got_f, rows, W, 0, C), columns(ref, rows, W, 0, C), kBf16Rtol, kScaleTol)) << "dq";
    EXPECT_TRUE(all_close(columns(got_f, rows, W, C, kv), columns(ref, rows, W, C, kv), kBf16Rtol, kScaleTol)) << "dk";
    EXPECT_TRUE(all_close(columns(got_f, rows, W, C + kv, kv), columns(ref, rows, W, C + kv, kv), kBf16Rtol,
                          kScaleTol))
        << "dv";

    dqkv.upload(Bits(qkv.bits.size(), 0x7FC0));
    cuda::attention_backward(dqkv.get(), d_dout.get(), d_qkv.get(), out.get(), att_gpu.get(), B, T, C, NH, NKV,
                             ws.ws(), s);
    cuda::rope(dqkv.get(), d_table.get(), B, T, NH, NKV, hs, true, s);
    s.sync();
    EXPECT_TRUE(same_bits(dqkv.download(), got)) << "dqkv, second run";
}

// Fused: hs 64 (groups of 2 and 4), hs 128 (group 2), multi-head in the GQA layout; padded
// to 64: hs 16 (group 2, and more batch rows than heads), hs 24 (group 4); cuBLAS (hs 160)
// along the heads (group 2), along the batch rows (groups of 2 and 4), each of those also
// with the workspace of 2 batch rows (calls of fewer rows than the batch).
INSTANTIATE_TEST_SUITE_P(Shapes, CudaGqaRope,
                         ::testing::Values(GqaShape{2, 100, 256, 4, 2}, GqaShape{2, 257, 256, 4, 1},
                                           GqaShape{1, 130, 512, 4, 2}, GqaShape{2, 70, 128, 2, 2},
                                           GqaShape{2, 33, 64, 4, 2}, GqaShape{2, 50, 96, 4, 1},
                                           GqaShape{6, 40, 64, 4, 2}, GqaShape{2, 33, 640, 4, 2},
                                           GqaShape{6, 40, 640, 4, 2}, GqaShape{5, 33, 640, 4, 1},
                                           GqaShape{6, 40, 640, 4, 2, 2}, GqaShape{5, 33, 640, 4, 1, 2}));

TEST(CudaRope, InverseUndoesItAndVIsUntouched) {
    FP8SCOPE_REQUIRE_GPU();
    const int B = 2, T = 9, NH = 4, NKV = 2, hs = 64, W = (NH + 2 * NKV) * hs;
    std::mt19937 rng(43);
    const Bf16Data x = random_bf16(std::size_t(B) * T * W, rng);
    const std::vector<float> table = rope_table(T, hs, 500000.0);
    GpuBuffer<float> d_table(table);
    GpuBuffer<std::uint16_t> d(x.bits);
    Stream s;
    cuda::rope(d.get(), d_table.get(), B, T, NH, NKV, hs, false, s);
    s.sync();
    const auto turned = widen(d.download());
    const int v0 = (NH + NKV) * hs;
    EXPECT_TRUE(same_bits(columns(turned, B * T, W, v0, NKV * hs), columns(x.f, B * T, W, v0, NKV * hs))) << "v";
    EXPECT_FALSE(same_bits(columns(turned, B * T, W, 0, v0), columns(x.f, B * T, W, 0, v0))) << "q, k turned";
    cuda::rope(d.get(), d_table.get(), B, T, NH, NKV, hs, true, s);
    s.sync();
    // two BF16 roundings, each up to 2^-9 of the pair's size (|x| <= 1) in either element
    EXPECT_TRUE(all_close(widen(d.download()), x.f, 2 * kBf16Rtol, 4.0 / 512)) << "turned back";
}

}  // namespace
}  // namespace fp8scope
