// FP4 training on the CPU: the backend's emulated FP4 casts against quantize_fp4 (rowwise,
// columnwise with and without the random Hadamard transform, 16x16 tiles) on shapes that
// leave edge blocks and RHT tails; stochastic rounding reproducible across thread counts,
// keyed by step and unbiased; the wgrad GEMM through RHT-cast operands against float64
// dY^T X; the nvfp4 and mxfp4 training recipes (their names and options, 20-step runs);
// and the rounding key Fp8Linear gives each cast.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "cpu/cpu_backend.h"
#include "cpu/fp4.h"
#include "fp8/training_recipe.h"
#include "support/cpu_engine.h"
#include "support/tiny_config.h"
#include "support/train_recorder.h"

namespace fp8scope {
namespace {

struct Shape {
    std::int64_t rows, cols;
};
const Shape kShapes[] = {{17, 33}, {48, 20}, {16, 16}, {33, 17}, {5, 64}, {1, 47}};

std::vector<float> randn(std::int64_t n, std::uint32_t seed, float scale = 1.0f) {
    std::mt19937 g(seed);
    std::normal_distribution<float> d(0.0f, scale);
    std::vector<float> v(static_cast<std::size_t>(n));
    for (float& x : v) x = d(g);
    if (n > 3) v[3] *= 40.0f;  // an outlier, so blocks differ in scale
    return v;
}

std::vector<float> transpose(const std::vector<float>& x, std::int64_t rows, std::int64_t cols) {
    std::vector<float> t(x.size());
    for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t c = 0; c < cols; ++c) t[c * rows + r] = x[r * cols + c];
    return t;
}

std::vector<float> dequantized(const FP4Tensor& q) {
    std::vector<float> v(static_cast<std::size_t>(q.rows * q.cols));
    for (std::int64_t r = 0; r < q.rows; ++r)
        for (std::int64_t c = 0; c < q.cols; ++c) v[r * q.cols + c] = q.dequantize(r, c);
    return v;
}

// Bit-for-bit equality of n floats, naming the first difference.
void expect_same_bits(const float* got, const std::vector<float>& want, const std::string& what) {
    for (std::size_t i = 0; i < want.size(); ++i) {
        if (std::bit_cast<std::uint32_t>(got[i]) != std::bit_cast<std::uint32_t>(want[i])) {
            ADD_FAILURE() << what << ": element " << i << " is " << got[i] << ", quantize_fp4 gives " << want[i];
            return;
        }
    }
}

Recipe without_rht(Recipe r) {
    std::visit([](auto& q) { if constexpr (requires { q.rht; }) q.rht = false; }, r);
    return r;
}

// ---- the backend's cast against quantize_fp4 --------------------------------------------

TEST(Fp4Cast, CopiesAreQuantizeFp4DequantizedOnAwkwardShapes) {
    CpuBackend cpu(2);
    for (const char* name : {"nvfp4", "nvfp4:rht=1", "nvfp4:rht=1:sr=1", "nvfp4_2d", "nvfp4_2d:sr=1", "mxfp4_rceil",
                             "mxfp4_floor:rht=1", "mxfp4_rceil:sr=1"}) {
        const Recipe r = parse_recipe(name);
        const FP4Plan plan = fp4_plan(r, 1.0f);
        for (const Shape s : kShapes) {
            const std::string what = std::string(name) + " " + std::to_string(s.rows) + "x" + std::to_string(s.cols);
            std::vector<float> x = randn(s.rows * s.cols, std::uint32_t(s.rows * 131 + s.cols));
            CastSpec spec;
            spec.recipe = &r;
            spec.columnwise = true;
            spec.rounding = {7, 3, 5u << 3 | 2u << 1};
            CastInfo info;
            spec.report = &info;
            auto storage = cpu.make_operand_storage();
            const GemmOperand op = cpu.cast(TensorDesc{x.data(), DType::F32, s.rows, s.cols, Device::CPU, false}, spec, *storage);
            EXPECT_TRUE(op.emulated);
            EXPECT_EQ(op.mode, std::holds_alternative<NVFP4Scaling>(r) ? ScalingMode::NVFP4 : ScalingMode::MXFP4);
            // Rowwise: x along its rows, never transformed, keyed by the spec's tensor id.
            const FP4Tensor row = quantize_fp4(MatrixView{x.data(), s.rows, s.cols}, without_rht(r), 1, spec.rounding);
            const std::vector<float> row_want = dequantized(row);
            ASSERT_EQ(op.rowwise.rows, s.rows);
            expect_same_bits(static_cast<const float*>(op.rowwise.data), row_want, what + " rowwise");
            float amax = 0;
            for (float v : x) amax = std::max(amax, std::abs(v));
            EXPECT_EQ(info.amax, amax) << what;
            EXPECT_TRUE(std::isnan(info.scale)) << what;
            EXPECT_EQ(info.overflow, row.overflow) << what;
            // Columnwise: 16x16 tiles without rht are the rowwise copy transposed; otherwise
            // x^T cast along its rows (with rht: transformed), keyed by tensor | 1.
            ASSERT_EQ(op.columnwise.rows, s.cols);
            ASSERT_EQ(op.columnwise.cols, s.rows);
            std::vector<float> col_got(x.size());
            for (std::int64_t r2 = 0; r2 < s.cols; ++r2)
                for (std::int64_t c = 0; c < s.rows; ++c)
                    col_got[r2 * s.rows + c] = op.columnwise.transposed
                                                   ? static_cast<const float*>(op.columnwise.data)[c * s.cols + r2]
                                                   : static_cast<const float*>(op.columnwise.data)[r2 * s.rows + c];
            std::vector<float> col_want;
            if (plan.block_rows == 16 && !plan.rht) {
                EXPECT_TRUE(op.columnwise.transposed) << what;
                col_want = transpose(row_want, s.rows, s.cols);
            } else {
                const std::vector<float> xt = transpose(x, s.rows, s.cols);
                cast::RoundingKey key = spec.rounding;
                key.tensor |= 1u;
                col_want = dequantized(quantize_fp4(MatrixView{xt.data(), s.cols, s.rows}, r, 1, key));
            }
            expect_same_bits(col_got.data(), col_want, what + " columnwise");
        }
    }
}

// quantize_fp4 with rht casts the tensor whose rows' full 16-blocks went through rht16 one
// by one, the tail left as it is: the same codes as quantize_fp4 without rht of that tensor.
TEST(Fp4Cast, RhtTransformsFullBlocksOfEachRowAndLeavesTheTail) {
    for (const Shape s : kShapes) {
        const std::vector<float> x = randn(s.rows * s.cols, 99);
        std::vector<float> t = x;
        for (std::int64_t r = 0; r < s.rows; ++r)
            for (std::int64_t c = 0; c + 16 <= s.cols; c += 16) cast::rht16(t.data() + r * s.cols + c);
        for (const char* name : {"nvfp4", "mxfp4_rceil", "nvfp4_2d"}) {
            Recipe with = parse_recipe(std::string(name) + ":rht=1");
            const FP4Tensor a = quantize_fp4(MatrixView{x.data(), s.rows, s.cols}, with);
            const FP4Tensor b = quantize_fp4(MatrixView{t.data(), s.rows, s.cols}, parse_recipe(name));
            EXPECT_EQ(a.codes, b.codes) << name << " " << s.rows << "x" << s.cols;
            EXPECT_EQ(a.scale_codes, b.scale_codes) << name;
            EXPECT_EQ(a.tensor_scale_inv, b.tensor_scale_inv) << name;  // the transformed tensor's amax
            if (s.cols >= 16) EXPECT_NE(a.codes, quantize_fp4(MatrixView{x.data(), s.rows, s.cols}, parse_recipe(name)).codes);
        }
    }
}

// ---- stochastic rounding ----------------------------------------------------------------

TEST(Fp4StochasticRounding, SameBitsForEveryThreadCountAndNewOnesEachStep) {
    const std::int64_t rows = 96, cols = 1040;  // bands enough for both threads
    const std::vector<float> x = randn(rows * cols, 3);
    const MatrixView v{x.data(), rows, cols};
    for (const char* name : {"nvfp4:sr=1", "nvfp4_2d:sr=1:rht=1", "mxfp4_rceil:rht=1:sr=1"}) {
        const Recipe r = parse_recipe(name);
        const cast::RoundingKey key{11, 4, 6};
        const FP4Tensor one = quantize_fp4(v, r, 1, key), two = quantize_fp4(v, r, 2, key);
        EXPECT_EQ(one.codes, two.codes) << name;
        EXPECT_EQ(one.scale_codes, two.scale_codes) << name;
        std::vector<float> f1(x.size()), f2(x.size());
        fp4_fake_quantize(v, r, f1.data(), key, 1);
        fp4_fake_quantize(v, r, f2.data(), key, 2);
        expect_same_bits(f1.data(), f2, std::string(name) + " threads 1 vs 2");
        expect_same_bits(f1.data(), dequantized(one), std::string(name) + " fake vs quantize_fp4");
        const FP4Tensor next = quantize_fp4(v, r, 2, {11, 5, 6});
        std::int64_t differ = 0;
        for (std::size_t i = 0; i < x.size(); ++i) differ += next.codes[i] != one.codes[i];
        EXPECT_GT(differ, std::int64_t(x.size()) / 10) << name << ": a new step draws new bits";
        // The bits are rounding_bits of the element's row-major index.
        std::vector<std::uint32_t> bits(37);
        rounding_bits_run(key, 1001, 37, bits.data());
        for (int i = 0; i < 37; ++i) EXPECT_EQ(bits[i], cast::rounding_bits(key, 1001 + i));
    }
}

TEST(Fp4StochasticRounding, MeanOfManyStepsConvergesToX) {
    const std::int64_t rows = 16, cols = 48;
    const std::vector<float> x = randn(rows * cols, 21);
    const MatrixView v{x.data(), rows, cols};
    for (const char* name : {"nvfp4:sr=1", "mxfp4_rceil:sr=1"}) {
        const Recipe r = parse_recipe(name);
        const int steps = 4000;
        std::vector<double> mean(x.size(), 0.0);
        std::vector<float> out(x.size());
        for (int s = 0; s < steps; ++s) {
            fp4_fake_quantize(v, r, out.data(), {1, std::uint64_t(s), 2});
            for (std::size_t i = 0; i < x.size(); ++i) mean[i] += out[i] / double(steps);
        }
        std::vector<float> nearest(x.size());
        fp4_fake_quantize(v, without_rht(parse_recipe(name == std::string("nvfp4:sr=1") ? "nvfp4" : "mxfp4_rceil")),
                          nearest.data());
        double bias = 0, rtn = 0;
        for (std::size_t i = 0; i < x.size(); ++i) {
            bias += std::abs(mean[i] - x[i]);
            rtn += std::abs(double(nearest[i]) - x[i]);
        }
        // Round to nearest errs by about a quarter step on average, the mean of 4000
        // stochastic casts by at most half a step / sqrt(4000), under 2 % of it.
        EXPECT_LT(bias, 0.05 * rtn) << name << ": bias " << bias << ", nearest's error " << rtn;
    }
}

// ---- wgrad through RHT-cast operands ------------------------------------------------------

TEST(Fp4Wgrad, RhtLeavesTheProductAndFp4ApproximatesIt) {
    const std::int64_t N = 50, M = 20, K = 24;  // N: three full 16-blocks and a tail of 2
    const std::vector<float> dy = randn(N * M, 5), x = randn(N * K, 6);
    // float64 dY^T X
    std::vector<double> exact(M * K, 0.0);
    for (std::int64_t n = 0; n < N; ++n)
        for (std::int64_t m = 0; m < M; ++m)
            for (std::int64_t k = 0; k < K; ++k) exact[m * K + k] += double(dy[n * M + m]) * x[n * K + k];
    auto rel_err = [&](const std::vector<double>& got) {
        double e = 0, s = 0;
        for (std::size_t i = 0; i < got.size(); ++i) e += (got[i] - exact[i]) * (got[i] - exact[i]), s += exact[i] * exact[i];
        return std::sqrt(e / s);
    };
    // Transformed but unquantized operands: the same product to float32 rounding.
    std::vector<float> dyt = transpose(dy, N, M), xt = transpose(x, N, K);
    rht_rows(dyt.data(), M, N);
    rht_rows(xt.data(), K, N);
    std::vector<double> through(M * K, 0.0);
    for (std::int64_t m = 0; m < M; ++m)
        for (std::int64_t k = 0; k < K; ++k)
            for (std::int64_t n = 0; n < N; ++n) through[m * K + k] += double(dyt[m * N + n]) * xt[k * N + n];
    EXPECT_LT(rel_err(through), 1e-6);
    EXPECT_NE(dyt, transpose(dy, N, M));

    // The backend's wgrad GEMM on the FP4 columnwise copies, with and without RHT.
    CpuBackend cpu(2);
    for (const char* name : {"nvfp4:rht=1", "nvfp4", "mxfp4_rceil:rht=1"}) {
        const Recipe r = parse_recipe(name);
        CastSpec spec;
        spec.recipe = &r;
        spec.columnwise = true;
        auto sd = cpu.make_operand_storage(), sx = cpu.make_operand_storage();
        const GemmOperand a = cpu.cast(TensorDesc{const_cast<float*>(dy.data()), DType::F32, N, M, Device::CPU, false}, spec, *sd);
        const GemmOperand b = cpu.cast(TensorDesc{const_cast<float*>(x.data()), DType::F32, N, K, Device::CPU, false}, spec, *sx);
        std::vector<float> dw(M * K);
        cpu.gemm(a, Copy::Columnwise, b, Copy::Columnwise, TensorDesc{dw.data(), DType::F32, M, K, Device::CPU, false},
                 nullptr, false, {});
        const double e = rel_err(std::vector<double>(dw.begin(), dw.end()));
        // E2M1 keeps about 1.5 bits: elements err by ~10 %, a sum of 50 products by less.
        EXPECT_LT(e, 0.2) << name;
        EXPECT_GT(e, 1e-3) << name << ": the operands were quantized";
    }
}

// ---- the recipes --------------------------------------------------------------------------

TEST(Fp4TrainingRecipe, DefaultsOptionsAndCanonicalNames) {
    const TrainingRecipe nv = training_recipe("nvfp4");
    EXPECT_EQ(nv.name, "nvfp4");
    EXPECT_EQ(recipe_name(*nv.x), "nvfp4:rht=1");
    EXPECT_EQ(recipe_name(*nv.w), "nvfp4_2d");
    EXPECT_EQ(recipe_name(*nv.dy), "nvfp4:rht=1:sr=1");
    const TrainingRecipe plain = training_recipe("nvfp4:2d=0:sr=0:rht=0");
    EXPECT_EQ(plain.name, "nvfp4:rht=0:sr=0:2d=0");
    EXPECT_EQ(recipe_name(*plain.x), "nvfp4");
    EXPECT_EQ(recipe_name(*plain.w), "nvfp4");
    EXPECT_EQ(recipe_name(*plain.dy), "nvfp4");
    EXPECT_EQ(training_recipe("nvfp4:rht=1:sr=1:2d=1").name, "nvfp4");
    EXPECT_EQ(recipe_name(*training_recipe("nvfp4:sr=0").dy), "nvfp4:rht=1");
    const TrainingRecipe mx = training_recipe("mxfp4");
    EXPECT_EQ(recipe_name(*mx.x), "mxfp4_rceil");
    EXPECT_EQ(recipe_name(*mx.w), "mxfp4_rceil");
    EXPECT_EQ(recipe_name(*mx.dy), "mxfp4_rceil");
    const TrainingRecipe mx2 = training_recipe("mxfp4:sr=1:rht=1");
    EXPECT_EQ(mx2.name, "mxfp4:rht=1:sr=1");
    EXPECT_EQ(recipe_name(*mx2.x), "mxfp4_rceil:rht=1");
    EXPECT_EQ(recipe_name(*mx2.w), "mxfp4_rceil");  // W's columnwise copy meets an untransformed dY in dgrad
    EXPECT_EQ(recipe_name(*mx2.dy), "mxfp4_rceil:rht=1:sr=1");
    for (const char* n : {"nvfp4", "nvfp4:rht=0", "nvfp4:sr=0", "nvfp4:2d=0", "nvfp4:rht=0:sr=0:2d=0", "mxfp4",
                          "mxfp4:rht=1", "mxfp4:sr=1", "mxfp4:rht=1:sr=1"})
        EXPECT_EQ(training_recipe(n).name, n) << "canonical names read back as themselves";
    const auto names = training_recipe_names();
    EXPECT_NE(std::find(names.begin(), names.end(), "nvfp4"), names.end());
    EXPECT_NE(std::find(names.begin(), names.end(), "mxfp4"), names.end());
}

TEST(Fp4TrainingRecipe, BadOptionsAreNamed) {
    auto error = [](const char* name) {
        try {
            (void)training_recipe(name);
        } catch (const std::invalid_argument& e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    EXPECT_EQ(error("nvfp4:foo=1"), "training recipe 'nvfp4:foo=1': unknown option 'foo'; known: rht, sr, 2d");
    EXPECT_EQ(error("mxfp4:2d=0"), "training recipe 'mxfp4:2d=0': unknown option '2d'; known: rht, sr");
    EXPECT_EQ(error("nvfp4:rht=2"), "training recipe 'nvfp4:rht=2': option 'rht' must be 0 or 1, got '2'");
    EXPECT_EQ(error("nvfp4:rht"), "training recipe 'nvfp4:rht': option 'rht' needs a value (key=value)");
    EXPECT_EQ(error("nvfp4:sr=0:sr=1"), "training recipe 'nvfp4:sr=0:sr=1': option 'sr' given more than once");
    EXPECT_EQ(error("nvfp4:"), "training recipe 'nvfp4:': empty option (a trailing ':')");
    EXPECT_EQ(error("nvfp4:rht=0::sr=0"), "training recipe 'nvfp4:rht=0::sr=0': empty option (two ':' in a row or a trailing ':')");
    EXPECT_EQ(error("current:rht=0"), "training recipe 'current:rht=0': current takes no options (only nvfp4 and mxfp4 do)");
    EXPECT_NE(error("nvfp5").find("unknown training recipe 'nvfp5'"), std::string::npos);
    EXPECT_NE(error("nvfp5").find("nvfp4, mxfp4"), std::string::npos);
}

// ---- training -----------------------------------------------------------------------------

std::vector<std::vector<float>> train_losses(const std::vector<std::string>& recipes) {
    TrainConfig c = testing::tiny_config(20);
    c.compare = recipes;
    c.threads = 2;
    testing::CpuTrainer t(c);
    testing::Recorder rec;
    t.add_observer(&rec);
    const TrainSummary s = t.run();
    EXPECT_TRUE(s.error.empty()) << s.error;
    std::vector<std::vector<float>> out;
    for (std::size_t r = 0; r < recipes.size(); ++r) out.push_back(rec.losses(int(r)));
    return out;
}

TEST(Fp4Training, RecipesTrainNearBaselineAndReproduce) {
    const std::vector<std::string> recipes = {"baseline", "nvfp4", "nvfp4:sr=0", "mxfp4", "mxfp4:rht=1:sr=1"};
    const auto a = train_losses(recipes);
    const auto b = train_losses(recipes);
    ASSERT_EQ(a.size(), recipes.size());
    for (std::size_t r = 0; r < recipes.size(); ++r) {
        ASSERT_EQ(a[r].size(), 20u) << recipes[r];
        EXPECT_EQ(a[r], b[r]) << recipes[r] << ": two runs give the same losses";
        for (float l : a[r]) EXPECT_TRUE(std::isfinite(l)) << recipes[r];
        EXPECT_LT(a[r].back(), 0.8f * a[r].front()) << recipes[r] << " learns";
        EXPECT_NEAR(a[r].back(), a[0].back(), 0.15f * a[0].back()) << recipes[r] << " against baseline";
        if (r > 0) EXPECT_NE(a[r], a[0]) << recipes[r] << " quantizes";
    }
    EXPECT_NE(a[1], a[2]) << "stochastic rounding of dY changes the run";
}

}  // namespace
}  // namespace fp8scope
