// The FP4 training cast through CudaBackend::cast and the FP4 GEMM through
// CudaBackend::gemm, against fp4_reference.h (cast_rules.h written out in plain loops):
// - every BF16 element of both copies is the reference's decode(q) * s_b bit for bit (and
//   exact: the float32 product has nothing below BF16's bits), NaN where a block holds NaN
//   or Inf; each copy's S_dec bit for bit; the report's amax, scale (NaN, block scales)
//   and rowwise overflow;
//   for nvfp4, nvfp4:rht=1, nvfp4:sr=1 (with rht too), nvfp4_2d (with sr: the transpose, bits and all; with rht and sr), mxfp4_floor,
//   mxfp4_rceil:sr=1:rht=1, BF16 and float32 inputs, shapes that leave partial blocks,
//   tiles and rht tails, with and without a NaN and an Inf;
// - stochastic rounding: the same key gives the same bits, another step other bits;
// - the GEMM of FP4 operands (with bias, and accumulating) equals the float64 product of
//   the dequantized operands (value * S_dec) to float32 accumulation's tolerance.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "backend/device_memory.h"
#include "cuda/cuda_backend.h"
#include "fp4_reference.h"
#include "gpu_test.h"
#include "io/half.h"

namespace fp8scope {
namespace {

using testing::Fp4Ref;
using testing::Fp4RefCopy;

// x on the device as `dtype`; x itself becomes the values the device reads.
struct Uploaded {
    DeviceBuffer<float> buffer;
    TensorDesc desc;
};

Uploaded upload(CudaBackend& gpu, std::vector<float>& x, std::int64_t rows, std::int64_t cols, DType dtype) {
    Uploaded u;
    u.buffer = DeviceBuffer<float>(gpu, x.size() + 1);
    if (dtype == DType::BF16) {
        std::vector<std::uint16_t> bits(x.size());
        for (std::size_t i = 0; i < x.size(); ++i) bits[i] = float_to_bf16(x[i]), x[i] = bf16_to_float(bits[i]);
        gpu.copy_from_host(u.buffer.data(), bits.data(), bits.size() * 2);
    } else {
        gpu.copy_from_host(u.buffer.data(), x.data(), x.size() * 4);
    }
    u.desc = TensorDesc{u.buffer.data(), dtype, rows, cols, Device::CUDA, false};
    return u;
}

std::vector<std::uint16_t> download_bf16(CudaBackend& gpu, const TensorDesc& t) {
    std::vector<std::uint16_t> out(std::size_t(t.numel()));
    gpu.copy_to_host(out.data(), t.data, out.size() * 2);
    return out;
}

float download_scalar(CudaBackend& gpu, const float* p) {
    float v = 0.0f;
    gpu.copy_to_host(&v, p, 4);
    return v;
}

std::uint32_t bits(float f) {
    std::uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
}

// The device's BF16 copy against the reference's float32 values: exact, bit for bit.
void expect_copy(const std::vector<std::uint16_t>& got, const Fp4RefCopy& ref, const std::string& what) {
    ASSERT_EQ(got.size(), ref.values.size()) << what;
    int shown = 0;
    for (std::size_t i = 0; i < got.size() && shown < 5; ++i) {
        const float want = ref.values[i];
        const float have = bf16_to_float(got[i]);
        const bool ok = std::isnan(want) ? std::isnan(have) : (bits(want) & 0xFFFFu) == 0 && got[i] == bits(want) >> 16;
        if (!ok) {
            ADD_FAILURE() << what << ": element " << i << " (" << i / ref.cols << "," << i % ref.cols << ") is " << have
                          << ", want " << want << " (code " << int(ref.codes[i]) << ")";
            ++shown;
        }
    }
}

constexpr cast::RoundingKey kKey{0x0123456789ABCDEFull, 7, 6u << 1};

// The columnwise copy, the rowwise one where asked, reporting into `report`; synchronized.
GemmOperand cast_copies(CudaBackend& gpu, const TensorDesc& x, const Recipe& recipe, bool rowwise, CastInfo& report,
                        OperandStorage& storage) {
    CastSpec spec;
    spec.recipe = &recipe;
    spec.rowwise = rowwise;
    spec.columnwise = true;
    spec.report = &report;
    spec.rounding = kKey;
    const GemmOperand op = gpu.cast(x, spec, storage);
    gpu.synchronize();
    return op;
}

TEST(CudaFp4TrainingCast, CopiesAndTensorScalesMatchTheReferenceBitForBit) {
    FP8SCOPE_REQUIRE_GPU();
    CudaBackend gpu;
    // Shapes of whole 16-byte rows (BF16 of multiples of 8) take the staged kernel: whole
    // tiles of 32 x 128, partial tiles, and blocks cut short at the edge.
    const std::int64_t shapes[][2] = {{17, 33},  {48, 20},  {1, 16},  {16, 1},   {130, 260}, {64, 64},
                                      {257, 96}, {40, 200}, {128, 256}, {200, 392}, {8, 136},  {72, 8}, {96, 520}};
    for (const char* name : {"nvfp4", "nvfp4:rht=1", "nvfp4:sr=1", "nvfp4:rht=1:sr=1", "nvfp4_2d", "nvfp4_2d:sr=1", "nvfp4_2d:rht=1:sr=1", "mxfp4_floor",
                             "mxfp4_rceil", "mxfp4_rceil:sr=1:rht=1", "mxfp4_rceil:rht=1"}) {
        const Recipe recipe = parse_recipe(name);
        for (const auto& [rows, cols] : shapes)
            for (const DType dtype : {DType::F32, DType::BF16})
                for (const bool specials : {false, true}) {
                    const std::string what = std::string(name) + " " + std::to_string(rows) + "x" + std::to_string(cols) +
                                             " " + dtype_name(dtype) + (specials ? " with NaN and Inf" : "");
                    std::vector<float> x = testing::fp4_test_data(rows, cols, specials);
                    Uploaded u = upload(gpu, x, rows, cols, dtype);
                    auto storage = gpu.make_operand_storage();
                    CastInfo report;
                    const GemmOperand op = cast_copies(gpu, u.desc, recipe, true, report, *storage);
                    const Fp4Ref ref = testing::fp4_reference(x, rows, cols, recipe, kKey);

                    ASSERT_EQ(op.rowwise.dtype, DType::BF16) << what;
                    ASSERT_EQ(op.columnwise.dtype, DType::BF16) << what;
                    ASSERT_EQ(op.columnwise.rows, cols) << what;
                    ASSERT_TRUE(op.rowwise_tensor_scale_inv && op.columnwise_tensor_scale_inv) << what;
                    expect_copy(download_bf16(gpu, op.rowwise), ref.row, what + " rowwise");
                    expect_copy(download_bf16(gpu, op.columnwise), ref.col, what + " columnwise");
                    EXPECT_EQ(bits(download_scalar(gpu, op.rowwise_tensor_scale_inv)), bits(ref.row.tensor_scale_inv))
                        << what << ": rowwise S_dec";
                    EXPECT_EQ(bits(download_scalar(gpu, op.columnwise_tensor_scale_inv)), bits(ref.col.tensor_scale_inv))
                        << what << ": columnwise S_dec";
                    EXPECT_EQ(bits(report.amax), bits(ref.row.amax)) << what << ": amax";
                    EXPECT_TRUE(std::isnan(report.scale)) << what << ": block scales report NaN";
                    EXPECT_EQ(report.overflow, std::int64_t(ref.row.overflow)) << what << ": overflow";
                }
    }
}

// A wgrad operand alone: the columnwise copy without the rowwise one, whose pass then
// also takes the fused amax (MXFP4) from x itself, not from the transformed columns.
TEST(CudaFp4TrainingCast, ColumnwiseCopyAloneMatchesTheReference) {
    FP8SCOPE_REQUIRE_GPU();
    CudaBackend gpu;
    const std::int64_t shapes[][2] = {{64, 64}, {40, 200}, {200, 392}, {96, 520}, {17, 33}};
    for (const char* name : {"nvfp4", "nvfp4:rht=1", "nvfp4_2d", "mxfp4_floor", "mxfp4_rceil", "mxfp4_rceil:rht=1"}) {
        const Recipe recipe = parse_recipe(name);
        for (const auto& [rows, cols] : shapes)
            for (const bool specials : {false, true}) {
                const std::string what = std::string(name) + " " + std::to_string(rows) + "x" + std::to_string(cols) +
                                         (specials ? " with NaN and Inf" : "") + ", columnwise only";
                std::vector<float> x = testing::fp4_test_data(rows, cols, specials);
                Uploaded u = upload(gpu, x, rows, cols, DType::BF16);
                auto storage = gpu.make_operand_storage();
                CastInfo report;
                const GemmOperand op = cast_copies(gpu, u.desc, recipe, false, report, *storage);
                const Fp4Ref ref = testing::fp4_reference(x, rows, cols, recipe, kKey);
                expect_copy(download_bf16(gpu, op.columnwise), ref.col, what);
                EXPECT_EQ(bits(report.amax), bits(ref.row.amax)) << what << ": amax";
            }
    }
}

TEST(CudaFp4TrainingCast, StochasticRoundingIsReproducibleByKey) {
    FP8SCOPE_REQUIRE_GPU();
    CudaBackend gpu;
    const std::int64_t rows = 96, cols = 160;
    std::vector<float> x = testing::fp4_test_data(rows, cols, false);
    Uploaded u = upload(gpu, x, rows, cols, DType::BF16);
    for (const char* name : {"nvfp4:sr=1", "mxfp4_rceil:sr=1"}) {
        const Recipe stochastic = parse_recipe(name);
        const Recipe nearest = parse_recipe(std::string(name).substr(0, std::string(name).find(':')));
        auto cast_with = [&](const Recipe& recipe, cast::RoundingKey key) {
            auto storage = gpu.make_operand_storage();
            CastSpec spec;
            spec.recipe = &recipe;
            spec.columnwise = true;
            spec.rounding = key;
            const GemmOperand op = gpu.cast(u.desc, spec, *storage);
            return std::make_pair(download_bf16(gpu, op.rowwise), download_bf16(gpu, op.columnwise));
        };
        cast::RoundingKey next = kKey;
        ++next.step;
        const auto a = cast_with(stochastic, kKey), b = cast_with(stochastic, kKey), c = cast_with(stochastic, next);
        EXPECT_EQ(a.first, b.first) << name;
        EXPECT_EQ(a.second, b.second) << name;
        EXPECT_NE(a.first, c.first) << name << ": another step draws other bits";
        EXPECT_NE(a.second, c.second) << name;
        // Without sr the key plays no part.
        const auto d = cast_with(nearest, kKey), e = cast_with(nearest, next);
        EXPECT_EQ(d.first, e.first) << name;
        EXPECT_EQ(d.second, e.second) << name;
        EXPECT_NE(a.first, d.first) << name << ": stochastic and nearest rounding differ somewhere";
    }
}

// out = A B^T (+ bias) (+ out) from FP4 operands: against the float64 product of x'
// = value * S_dec of each copy, within float32 accumulation's error (k 2^-24 of sum |a b|,
// plus the rounding of alpha and of the output) and, for BF16 output, half a BF16 ulp.
TEST(CudaFp4Gemm, EqualsTheFloat64ProductOfTheDequantizedOperands) {
    FP8SCOPE_REQUIRE_GPU();
    CudaBackend gpu;
    const std::int64_t m = 72, n = 40, k = 96;
    for (const char* name : {"nvfp4", "nvfp4:rht=1:sr=1", "nvfp4_2d", "mxfp4_rceil"})
        for (const bool columnwise : {false, true})
            for (const DType out_dtype : {DType::F32, DType::BF16}) {
                const Recipe recipe = parse_recipe(name);
                const std::string what = std::string(name) + (columnwise ? " columnwise" : " rowwise") + " " +
                                         dtype_name(out_dtype);
                // Copy c of operand (rows, cols) is (k-side last): rowwise casts (m, k); the
                // columnwise copy of (k, m) is (m, k) too.
                auto operand = [&](std::int64_t rows, std::uint64_t seed) {
                    std::vector<float> x = testing::fp4_test_data(columnwise ? k : rows, columnwise ? rows : k, false);
                    for (float& v : x) v *= float(seed);
                    return x;
                };
                std::vector<float> xa = operand(m, 3), xb = operand(n, 5);
                Uploaded ua = upload(gpu, xa, columnwise ? k : m, columnwise ? m : k, DType::BF16);
                Uploaded ub = upload(gpu, xb, columnwise ? k : n, columnwise ? n : k, DType::F32);
                auto sa = gpu.make_operand_storage(), sb = gpu.make_operand_storage();
                CastSpec spec;
                spec.recipe = &recipe;
                spec.rowwise = !columnwise;
                spec.columnwise = columnwise;
                spec.rounding = kKey;
                const GemmOperand qa = gpu.cast(ua.desc, spec, *sa);
                spec.rounding.tensor += 2;
                const GemmOperand qb = gpu.cast(ub.desc, spec, *sb);
                const Copy copy = columnwise ? Copy::Columnwise : Copy::Rowwise;
                const TensorDesc& A = columnwise ? qa.columnwise : qa.rowwise;
                const TensorDesc& B = columnwise ? qb.columnwise : qb.rowwise;
                ASSERT_EQ(A.rows, m);
                ASSERT_EQ(B.rows, n);
                const float sda = download_scalar(gpu, columnwise ? qa.columnwise_tensor_scale_inv : qa.rowwise_tensor_scale_inv);
                const float sdb = download_scalar(gpu, columnwise ? qb.columnwise_tensor_scale_inv : qb.rowwise_tensor_scale_inv);
                std::vector<float> av(std::size_t(m * k)), bv(std::size_t(n * k));
                {
                    const auto ab = download_bf16(gpu, A), bb = download_bf16(gpu, B);
                    for (std::size_t i = 0; i < av.size(); ++i) av[i] = bf16_to_float(ab[i]);
                    for (std::size_t i = 0; i < bv.size(); ++i) bv[i] = bf16_to_float(bb[i]);
                }
                std::vector<float> bias(static_cast<std::size_t>(n));
                for (std::int64_t j = 0; j < n; ++j) bias[std::size_t(j)] = 0.25f * float(j % 7) - 0.5f;
                DeviceBuffer<float> dbias(gpu, bias.size());
                gpu.copy_from_host(dbias.data(), bias.data(), bias.size() * 4);
                const bool accumulate = out_dtype == DType::F32;  // BF16 outputs are never accumulated into
                std::vector<float> start(std::size_t(m * n), 0.0f);
                if (accumulate)
                    for (std::size_t i = 0; i < start.size(); ++i) start[i] = float(int(i % 5)) - 2.0f;
                DeviceBuffer<float> out(gpu, std::size_t(m * n));
                std::vector<std::uint16_t> start16(start.size());
                for (std::size_t i = 0; i < start.size(); ++i) start16[i] = float_to_bf16(start[i]);
                if (out_dtype == DType::F32) gpu.copy_from_host(out.data(), start.data(), start.size() * 4);
                else gpu.copy_from_host(out.data(), start16.data(), start16.size() * 2);
                gpu.gemm(qa, copy, qb, copy, TensorDesc{out.data(), out_dtype, m, n, Device::CUDA, false}, dbias.data(),
                         accumulate, {});
                std::vector<float> got(std::size_t(m * n));
                if (out_dtype == DType::F32) {
                    gpu.copy_to_host(got.data(), out.data(), got.size() * 4);
                } else {
                    std::vector<std::uint16_t> g16(got.size());
                    gpu.copy_to_host(g16.data(), out.data(), g16.size() * 2);
                    for (std::size_t i = 0; i < got.size(); ++i) got[i] = bf16_to_float(g16[i]);
                }
                int shown = 0;
                for (std::int64_t i = 0; i < m; ++i)
                    for (std::int64_t j = 0; j < n; ++j) {
                        double sum = 0, mag = 0;
                        for (std::int64_t l = 0; l < k; ++l) {
                            const double p = double(av[std::size_t(i * k + l)]) * double(sda) *
                                             (double(bv[std::size_t(j * k + l)]) * double(sdb));
                            sum += p, mag += std::fabs(p);
                        }
                        const double want = sum + bias[std::size_t(j)] + (accumulate ? start[std::size_t(i * n + j)] : 0.0);
                        double tol = (double(k) + 4) * std::ldexp(1.0, -24) * (mag + std::fabs(want)) + 1e-30;
                        if (out_dtype == DType::BF16) tol += std::ldexp(1.0, -8) * std::fabs(want) + std::ldexp(1.0, -9) * std::fabs(bias[std::size_t(j)]);
                        if (std::fabs(got[std::size_t(i * n + j)] - want) > tol && shown++ < 5)
                            ADD_FAILURE() << what << " at " << i << "," << j << ": " << got[std::size_t(i * n + j)]
                                          << " vs " << want << " (tolerance " << tol << ")";
                    }
                EXPECT_EQ(shown, 0) << what;
            }
}

}  // namespace
}  // namespace fp8scope
