// The CUDA FP4 cast (kernels/cuda/cast/fp4.h) against the CPU's quantize_fp4: every packed
// code, block scale code, S_dec and the overflow counts bit for bit, rowwise (quantize_fp4
// of x) and columnwise (of x^T), for nvfp4, mxfp4_floor and mxfp4_rceil, BF16 and float32
// inputs, on shapes that leave edge blocks, odd rows and partial tiles, with data holding
// zeros, subnormals, outliers past the block scales and a block with NaN and one with Inf.
// Outputs are filled with 0xCD before the cast, so a kernel that skips a byte fails.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "cpu/fp4.h"
#include "cuda/cast/fp4.h"
#include "gpu_test.h"
#include "io/half.h"

namespace fp8scope {
namespace {

using testing::GpuBuffer;

std::vector<float> make_data(std::int64_t rows, std::int64_t cols, bool specials) {
    std::mt19937_64 rng(std::uint64_t(rows * 131 + cols));
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::uniform_real_distribution<float> uni(0.0f, 1.0f);
    std::vector<float> x(std::size_t(rows * cols));
    for (float& v : x) {
        const float u = uni(rng);
        v = normal(rng);
        if (u < 0.02f) v = 0.0f;
        else if (u < 0.03f) v = std::ldexp(normal(rng), -130);  // subnormal
        else if (u < 0.035f) v *= 300.0f;                        // outliers
    }
    if (specials && x.size() > 40) {
        x[3] = std::numeric_limits<float>::quiet_NaN();
        x[x.size() - 5] = -std::numeric_limits<float>::infinity();
    }
    return x;
}

// Rows of one code per byte, packed two to a byte as the device writes them.
std::vector<std::uint8_t> packed(const FP4Tensor& q) {
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

TEST(CudaFp4Cast, MatchesTheCpuBitForBitRowwiseAndColumnwise) {
    FP8SCOPE_REQUIRE_GPU();
    const std::int64_t shapes[][2] = {{1, 1}, {1, 17}, {17, 33}, {64, 64}, {130, 47}, {257, 1000}, {1024, 4096}};
    for (const char* name : {"nvfp4", "mxfp4_floor", "mxfp4_rceil"}) {
        const Recipe recipe = parse_recipe(name);
        const int block = cuda::fp4_block(recipe);
        for (const auto& [rows, cols] : shapes)
            for (bool bf16 : {false, true})
                for (bool specials : {false, true}) {
                    const std::string what = std::string(name) + " " + std::to_string(rows) + "x" +
                                             std::to_string(cols) + (bf16 ? " bf16" : " f32") +
                                             (specials ? " with NaN and Inf" : "");
                    std::vector<float> x = make_data(rows, cols, specials);
                    std::vector<std::uint16_t> x16(x.size());
                    for (std::size_t i = 0; i < x.size(); ++i) {
                        x16[i] = float_to_bf16(x[i]);
                        if (bf16) x[i] = bf16_to_float(x16[i]);  // the CPU casts the values the device reads
                    }
                    const FP4Tensor row = quantize_fp4({x.data(), rows, cols}, recipe, 2);
                    const std::vector<float> xt = transposed(x, rows, cols);
                    const FP4Tensor col = quantize_fp4({xt.data(), cols, rows}, recipe, 2);

                    GpuBuffer<float> xf(x);
                    GpuBuffer<std::uint16_t> xb(x16);
                    const std::int64_t row_ld = cuda::fp4_packed(cols), col_ld = cuda::fp4_packed(rows);
                    const std::int64_t row_nb = (cols + block - 1) / block, col_nb = (rows + block - 1) / block;
                    const std::vector<std::uint8_t> fill_rc(std::size_t(rows * row_ld), 0xCD),
                        fill_rs(std::size_t(rows * row_nb), 0xCD), fill_cc(std::size_t(cols * col_ld), 0xCD),
                        fill_cs(std::size_t(cols * col_nb), 0xCD);
                    GpuBuffer<std::uint8_t> rc(fill_rc), rs(fill_rs), cc(fill_cc), cs(fill_cs);
                    GpuBuffer<float> amax(1), sdec(1);
                    GpuBuffer<unsigned long long> overflow(2);
                    cuda::CastInput in{bf16 ? static_cast<const void*>(xb.get()) : xf.get(),
                                       bf16 ? DType::BF16 : DType::F32, rows, cols};
                    cuda::cast_fp4(in, recipe, {rc.get(), rs.get(), cc.get(), cs.get(), amax.get(), sdec.get(), overflow.get()},
                                   nullptr);
                    FP8SCOPE_CUDA_CHECK(cudaDeviceSynchronize());

                    EXPECT_EQ(rc.download(), packed(row)) << what << ": rowwise codes";
                    EXPECT_EQ(rs.download(), row.scale_codes) << what << ": rowwise scales";
                    EXPECT_EQ(cc.download(), packed(col)) << what << ": columnwise codes";
                    EXPECT_EQ(cs.download(), col.scale_codes) << what << ": columnwise scales";
                    const float s_dec = sdec.download()[0];
                    EXPECT_EQ(std::memcmp(&s_dec, &row.tensor_scale_inv, 4), 0)
                        << what << ": S_dec " << s_dec << " vs " << row.tensor_scale_inv;
                    const auto counts = overflow.download();
                    EXPECT_EQ(counts[0], static_cast<unsigned long long>(row.overflow)) << what;
                    EXPECT_EQ(counts[1], static_cast<unsigned long long>(col.overflow)) << what;
                }
    }
}

TEST(CudaFp4Cast, RefusesWhatItDoesNotCast) {
    EXPECT_THROW(cuda::fp4_block(parse_recipe("nvfp4_2d")), std::invalid_argument);
    EXPECT_THROW(cuda::fp4_block(parse_recipe("mxfp8_e4m3_floor")), std::invalid_argument);
    EXPECT_EQ(cuda::fp4_block(parse_recipe("nvfp4")), 16);
    EXPECT_EQ(cuda::fp4_block(parse_recipe("mxfp4_rceil")), 32);
}

}  // namespace
}  // namespace fp8scope
