// Outlier injection's scaled channels and rows on the GPU (kernels/cuda/ops/scale_channels.cu)
// against the CPU op, on BF16 and float32 tensors of awkward shapes: the CPU's float32
// product, rounded once to BF16, bit for bit; every element outside the listed channels
// keeps its bits.
#include <ostream>
#include <random>

#include "cpu/ops/elementwise.h"
#include "test_cuda_ops.h"

namespace fp8scope {
namespace {

using testing::Bf16Data;
using testing::GpuBuffer;
using testing::narrow;
using testing::random_bf16;
using testing::random_f32;
using testing::same_bits;
using testing::Stream;

struct Case {
    std::int64_t rows, cols;
    bool by_row;
    std::vector<std::int32_t> index;
};

// Test names say the case rather than its bytes.
void PrintTo(const Case& c, std::ostream* os) {
    *os << c.rows << "x" << c.cols << (c.by_row ? " rows" : " channels");
    for (std::int32_t i : c.index) *os << " " << i;
}

class CudaScaleChannels : public ::testing::TestWithParam<Case> {};

TEST_P(CudaScaleChannels, IsTheCpusBitwise) {
    FP8SCOPE_REQUIRE_GPU();
    const Case c = GetParam();
    std::mt19937 rng(71);
    const Bf16Data x = random_bf16(std::size_t(c.rows * c.cols), rng, -5.0f, 5.0f);
    const std::vector<float> xf = random_f32(x.f.size(), rng, -5.0f, 5.0f);
    const int count = int(c.index.size());
    GpuBuffer<std::int32_t> index(c.index);
    Stream s;
    for (float factor : {300.0f, 1e-3f, 0.7f}) {
        std::vector<float> ref = x.f, ref_f = xf;
        ops::scale_channels(ref.data(), c.rows, c.cols, c.index.data(), count, c.by_row, factor);
        ops::scale_channels(ref_f.data(), c.rows, c.cols, c.index.data(), count, c.by_row, factor);
        GpuBuffer<std::uint16_t> t(x.bits);
        GpuBuffer<float> t_f(xf);
        cuda::scale_channels(t.get(), c.rows, c.cols, index.get(), count, c.by_row, factor, s);
        cuda::scale_channels(t_f.get(), c.rows, c.cols, index.get(), count, c.by_row, factor, s);
        s.sync();
        EXPECT_TRUE(same_bits(t.download(), narrow(ref))) << "bf16, factor " << factor;
        EXPECT_TRUE(same_bits(t_f.download(), ref_f)) << "f32, factor " << factor;
    }
}

INSTANTIATE_TEST_SUITE_P(Shapes, CudaScaleChannels,
                         ::testing::Values(Case{51, 37, false, {17}}, Case{51, 37, true, {0, 50, 3}},
                                           Case{1024, 768, false, {17, 300, 767}}, Case{3, 8, true, {1}},
                                           Case{1030, 35, false, {0, 1, 2, 34}}));

}  // namespace
}  // namespace fp8scope
