// The CUDA FP4 cast (kernels/cuda/cast/fp4.h) against the CPU's quantize_fp4: every packed
// code, block scale code, S_dec and the overflow counts bit for bit, rowwise (quantize_fp4
// of x) and columnwise (of x^T), for nvfp4, nvfp4_2d, mxfp4_floor and mxfp4_rceil, BF16
// and float32 inputs, on shapes that leave edge blocks, odd rows and partial tiles, with
// data holding zeros, subnormals, outliers past the block scales and a block with NaN and
// one with Inf. With the training options rht and sr, against fp4_reference.h (cast_rules.h
// in plain loops): codes, scale codes, both copies' S_dec and amax, overflow.
// Outputs are filled with 0xCD before the cast, so a kernel that skips a byte fails.
#include <cuda_runtime.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

#include "cpu/fp4.h"
#include "cuda/cast/fp4.h"
#include "fp4_reference.h"
#include "gpu_test.h"
#include "io/half.h"

namespace fp8scope {
namespace {

using testing::GpuBuffer;

// Rows of one code per byte (the CPU's FP4Tensor, the reference's copy), packed two to a
// byte as the device writes them.
template <class Codes>
std::vector<std::uint8_t> packed(const Codes& q) {
    const std::int64_t ld = cuda::fp4_packed(q.cols);
    std::vector<std::uint8_t> out(std::size_t(q.rows * ld), 0);
    for (std::int64_t r = 0; r < q.rows; ++r)
        for (std::int64_t c = 0; c < q.cols; ++c)
            out[std::size_t(r * ld + c / 2)] |= std::uint8_t(q.codes[std::size_t(r * q.cols + c)] << (c % 2 ? 4 : 0));
    return out;
}

std::vector<float> transposed(const std::vector<float>& x, std::int64_t rows, std::int64_t cols) {
    std::vector<float> t(x.size());
    for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t c = 0; c < cols; ++c) t[std::size_t(c * rows + r)] = x[std::size_t(r * cols + c)];
    return t;
}

std::uint32_t bits(float f) {
    std::uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
}

// What cast_fp4 wrote, read back: packed codes and scale codes of both copies, the
// scalars {amax, S_dec, columnwise amax, columnwise S_dec} and the overflow counts.
struct DeviceCast {
    std::vector<std::uint8_t> row_codes, row_scales, col_codes, col_scales;
    std::vector<float> scalars;
    std::vector<unsigned long long> overflow;
};

// x (rows, cols) cast on the device as BF16 or float32; with bf16, x becomes the values the
// device reads. Outputs start as 0xCD.
DeviceCast cast_on_device(std::vector<float>& x, std::int64_t rows, std::int64_t cols, bool bf16, const Recipe& recipe,
                          const cast::RoundingKey& key) {
    std::vector<std::uint16_t> x16(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) {
        x16[i] = float_to_bf16(x[i]);
        if (bf16) x[i] = bf16_to_float(x16[i]);
    }
    GpuBuffer<float> xf(x);
    GpuBuffer<std::uint16_t> xb(x16);
    const std::int64_t block = cuda::fp4_block(recipe), br = cuda::fp4_block_rows(recipe);
    auto filled = [](std::int64_t n) { return std::vector<std::uint8_t>(std::size_t(n), 0xCD); };
    GpuBuffer<std::uint8_t> rc(filled(rows * cuda::fp4_packed(cols))),
        rs(filled((rows + br - 1) / br * ((cols + block - 1) / block))), cc(filled(cols * cuda::fp4_packed(rows))),
        cs(filled((cols + br - 1) / br * ((rows + block - 1) / block)));
    GpuBuffer<float> scalars(4);
    GpuBuffer<unsigned long long> overflow(2);
    float* sc = scalars.get();
    const cuda::CastInput in{bf16 ? static_cast<const void*>(xb.get()) : xf.get(), bf16 ? DType::BF16 : DType::F32,
                             rows, cols};
    cuda::cast_fp4(in, recipe, {rc.get(), rs.get(), cc.get(), cs.get(), sc, sc + 1, overflow.get(), sc + 2, sc + 3},
                   nullptr, key);
    FP8SCOPE_CUDA_CHECK(cudaDeviceSynchronize());
    return {rc.download(), rs.download(), cc.download(), cs.download(), scalars.download(), overflow.download()};
}

// Every quantizer x shape x input type x (data with and without a NaN and an Inf).
template <class F>
void for_each_case(std::initializer_list<const char*> names, std::initializer_list<std::array<std::int64_t, 2>> shapes,
                   F&& f) {
    for (const char* name : names) {
        const Recipe recipe = parse_recipe(name);
        for (const auto& [rows, cols] : shapes)
            for (bool bf16 : {false, true})
                for (bool specials : {false, true}) {
                    const std::string what = std::string(name) + " " + std::to_string(rows) + "x" +
                                             std::to_string(cols) + (bf16 ? " bf16" : " f32") +
                                             (specials ? " with NaN and Inf" : "");
                    std::vector<float> x = testing::fp4_test_data(rows, cols, specials);
                    f(recipe, x, rows, cols, bf16, what);
                }
    }
}

TEST(CudaFp4Cast, MatchesTheCpuBitForBitRowwiseAndColumnwise) {
    FP8SCOPE_REQUIRE_GPU();
    for_each_case({"nvfp4", "nvfp4_2d", "mxfp4_floor", "mxfp4_rceil"},
                  {{1, 1}, {1, 17}, {17, 33}, {64, 64}, {130, 47}, {257, 1000}, {1024, 4096}},
                  [](const Recipe& recipe, std::vector<float>& x, std::int64_t rows, std::int64_t cols, bool bf16,
                     const std::string& what) {
                      const DeviceCast got = cast_on_device(x, rows, cols, bf16, recipe, {});
                      const FP4Tensor row = quantize_fp4({x.data(), rows, cols}, recipe, 2);
                      const std::vector<float> xt = transposed(x, rows, cols);
                      const FP4Tensor col = quantize_fp4({xt.data(), cols, rows}, recipe, 2);
                      EXPECT_EQ(got.row_codes, packed(row)) << what << ": rowwise codes";
                      EXPECT_EQ(got.row_scales, row.scale_codes) << what << ": rowwise scales";
                      EXPECT_EQ(got.col_codes, packed(col)) << what << ": columnwise codes";
                      EXPECT_EQ(got.col_scales, col.scale_codes) << what << ": columnwise scales";
                      EXPECT_EQ(bits(got.scalars[1]), bits(row.tensor_scale_inv))
                          << what << ": S_dec " << got.scalars[1] << " vs " << row.tensor_scale_inv;
                      EXPECT_EQ(got.overflow[0], static_cast<unsigned long long>(row.overflow)) << what;
                      EXPECT_EQ(got.overflow[1], static_cast<unsigned long long>(col.overflow)) << what;
                  });
}

TEST(CudaFp4Cast, HadamardAndStochasticRoundingMatchTheReference) {
    FP8SCOPE_REQUIRE_GPU();
    const cast::RoundingKey key{0xFEEDFACE12345ull, 3, 10};
    for_each_case({"nvfp4:rht=1", "nvfp4:sr=1", "nvfp4:rht=1:sr=1", "nvfp4_2d:rht=1", "nvfp4_2d:sr=1", "mxfp4_rceil:sr=1:rht=1",
                   "mxfp4_floor:rht=1"},
                  {{17, 33}, {48, 20}, {1, 16}, {130, 260}, {64, 128}, {257, 100}},
                  [&](const Recipe& recipe, std::vector<float>& x, std::int64_t rows, std::int64_t cols, bool bf16,
                      const std::string& what) {
                      const DeviceCast got = cast_on_device(x, rows, cols, bf16, recipe, key);
                      const testing::Fp4Ref ref = testing::fp4_reference(x, rows, cols, recipe, key);
                      EXPECT_EQ(got.row_codes, packed(ref.row)) << what << ": rowwise codes";
                      EXPECT_EQ(got.row_scales, ref.row.scales) << what << ": rowwise scales";
                      EXPECT_EQ(got.col_codes, packed(ref.col)) << what << ": columnwise codes";
                      EXPECT_EQ(got.col_scales, ref.col.scales) << what << ": columnwise scales";
                      EXPECT_EQ(bits(got.scalars[0]), bits(ref.row.amax)) << what << ": amax";
                      EXPECT_EQ(bits(got.scalars[1]), bits(ref.row.tensor_scale_inv)) << what << ": rowwise S_dec";
                      if (std::holds_alternative<NVFP4Scaling>(recipe) && testing::fp4_has_rht(recipe)) {
                          EXPECT_EQ(bits(got.scalars[2]), bits(ref.col.amax)) << what << ": columnwise amax";
                      }
                      EXPECT_EQ(bits(got.scalars[3]), bits(ref.col.tensor_scale_inv)) << what << ": columnwise S_dec";
                      EXPECT_EQ(got.overflow[0], ref.row.overflow) << what;
                      EXPECT_EQ(got.overflow[1], ref.col.overflow) << what;
                  });
}

TEST(CudaFp4Cast, BlockShapes) {
    EXPECT_THROW(cuda::fp4_block(parse_recipe("mxfp8_e4m3_floor")), std::invalid_argument);
    EXPECT_EQ(cuda::fp4_block(parse_recipe("nvfp4")), 16);
    EXPECT_EQ(cuda::fp4_block_rows(parse_recipe("nvfp4")), 1);
    EXPECT_EQ(cuda::fp4_block(parse_recipe("nvfp4_2d")), 16);
    EXPECT_EQ(cuda::fp4_block_rows(parse_recipe("nvfp4_2d")), 16);
    EXPECT_EQ(cuda::fp4_block(parse_recipe("mxfp4_rceil")), 32);
    EXPECT_EQ(cuda::fp4_block_rows(parse_recipe("mxfp4_rceil")), 1);
}

}  // namespace
}  // namespace fp8scope
