// The device analysis (CudaBackend::analyze, kernels/cuda/analysis/analysis.h) against the CPU's
// analysis of the same values: counts, amaxes, scales, histogram, channel absmax, top
// values and tile absmax exactly; float64 figures to 1e-5 relative (the summation order
// and the float32 products differ). Shapes are awkward on purpose (not multiples of 32 or
// 128), in F32 and BF16, as stored and as transposed views, with NaN, Inf, zeros,
// subnormals, saturating outliers and a mean far from zero against the spread.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cpu/analysis.h"
#include "cuda/cuda_backend.h"
#include "gpu_test.h"
#include "io/half.h"

namespace fp8scope {
namespace {

// Every recipe of `analyze`, the FP4 quantizers (with the Hadamard transform and
// stochastic rounding too), delayed scaling (with a history's scale) and 2 x 32 blocks.
std::vector<Recipe> recipes() {
    std::vector<Recipe> r = default_analysis_recipes();
    for (const Recipe& q : fp4_analysis_recipes()) r.push_back(q);
    r.push_back(NVFP4Scaling{.rht = true});
    r.push_back(NVFP4Scaling{.two_d = true, .sr = true});
    r.push_back(MXFP4Scaling{.rule = MXRule::Floor, .rht = true, .sr = true});
    r.push_back(DelayedScaling{Format::E4M3});
    r.push_back(DelayedScaling{Format::E5M2});
    r.push_back(BlockScaling{Format::E5M2, 2, 32, false});
    r.push_back(MXScaling{Format::E4M3, MXRule::RCeil, 64});
    return r;
}

AnalysisExtras extras_for(const std::vector<Recipe>& r, bool maps) {
    AnalysisExtras e;
    e.tile_maps = maps;
    e.delayed_scales.assign(r.size(), std::numeric_limits<float>::quiet_NaN());
    e.delayed_scales[r.size() - 4] = 0.37f;  // delayed e4m3 casts with a history's scale; e5m2 with 1
    return e;
}

enum class Fill { Gaussian, Specials, Zeros, Tiny, Saturating, Offset };

std::vector<float> make_values(std::int64_t n, Fill fill, unsigned seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> g(0.25f, 1.0f);
    std::vector<float> x(std::size_t(n), 0.0f);
    if (fill == Fill::Zeros) return x;
    for (float& v : x) v = g(rng);
    if (fill == Fill::Tiny)
        for (float& v : x) v *= 1e-41f;  // float32 subnormals only
    if (fill == Fill::Offset)  // a mean some 200 standard deviations from zero, skewed
        for (float& v : x) v = 3.0f + 0.0075f * v * std::fabs(v);
    if (fill == Fill::Saturating)
        for (std::size_t i = 0; i < x.size(); i += 97) x[i] = 3e38f * (i % 2 ? 1 : -1);
    if (fill == Fill::Specials) {
        std::uniform_int_distribution<std::int64_t> at(0, n - 1);
        for (int i = 0; i < 1 + int(n / 500); ++i) {
            x[std::size_t(at(rng))] = std::numeric_limits<float>::quiet_NaN();
            x[std::size_t(at(rng))] = (i % 2 ? -1 : 1) * std::numeric_limits<float>::infinity();
            x[std::size_t(at(rng))] = 0.0f;
            x[std::size_t(at(rng))] = 1e-40f;
            x[std::size_t(at(rng))] = 900.0f;  // an outlier
            x[std::size_t(at(rng))] = -900.0f;  // the same |x|: ties by position
        }
    }
    return x;
}

// a and b agree to `rel` of the larger, NaN with NaN, Inf with the same Inf.
void expect_close(double a, double b, const std::string& what, double rel = 1e-5) {
    if (std::isnan(a) || std::isnan(b)) {
        EXPECT_TRUE(std::isnan(a) && std::isnan(b)) << what << ": " << a << " vs " << b;
        return;
    }
    if (std::isinf(a) || std::isinf(b)) {
        EXPECT_EQ(a, b) << what;
        return;
    }
    EXPECT_LE(std::fabs(a - b), rel * std::max(std::fabs(a), std::fabs(b))) << what << ": " << a << " vs " << b;
}

void expect_same_bits(double a, double b, const std::string& what) {
    if (std::isnan(a) && std::isnan(b)) return;
    EXPECT_EQ(a, b) << what;
}

void expect_analysis_equal(const Analysis& gpu, const Analysis& cpu, const std::string& where) {
    const TensorStats &g = gpu.tensor, &c = cpu.tensor;
    EXPECT_EQ(g.numel, c.numel) << where;
    EXPECT_EQ(g.finite, c.finite) << where;
    EXPECT_EQ(g.nan, c.nan) << where;
    EXPECT_EQ(g.inf, c.inf) << where;
    EXPECT_EQ(g.zero, c.zero) << where;
    expect_same_bits(gpu.scaling_amax, cpu.scaling_amax, where + " scaling amax");
    expect_same_bits(g.amax, c.amax, where + " amax");
    expect_same_bits(g.min_nonzero_abs, c.min_nonzero_abs, where + " min nonzero");
    expect_close(g.dynamic_range, c.dynamic_range, where + " dynamic range");
    // The mean may cancel to near zero: its error is relative to the rms.
    if (std::isnan(c.mean)) EXPECT_TRUE(std::isnan(g.mean)) << where;
    else EXPECT_LE(std::fabs(g.mean - c.mean), 1e-5 * c.rms + 1e-300) << where << " mean";
    expect_close(g.rms, c.rms, where + " rms");
    expect_close(g.stddev, c.stddev, where + " stddev");
    expect_close(g.outliers.kurtosis, c.outliers.kurtosis, where + " kurtosis");
    expect_same_bits(g.outliers.frac_beyond_k_rms, c.outliers.frac_beyond_k_rms, where + " beyond k rms");
    EXPECT_EQ(g.histogram.bins, c.histogram.bins) << where << " histogram";
    EXPECT_EQ(g.histogram.zero, c.histogram.zero) << where;
    EXPECT_EQ(g.histogram.nan, c.histogram.nan) << where;
    EXPECT_EQ(g.histogram.inf, c.histogram.inf) << where;
    EXPECT_EQ(g.outliers.channel_absmax, c.outliers.channel_absmax) << where << " channel absmax";
    ASSERT_EQ(g.outliers.top.size(), c.outliers.top.size()) << where << " top";
    for (std::size_t i = 0; i < c.outliers.top.size(); ++i) {
        EXPECT_EQ(std::memcmp(&g.outliers.top[i].value, &c.outliers.top[i].value, 4), 0)
            << where << " top " << i << ": " << g.outliers.top[i].value << " vs " << c.outliers.top[i].value;
        EXPECT_EQ(g.outliers.top[i].row, c.outliers.top[i].row) << where << " top " << i;
        EXPECT_EQ(g.outliers.top[i].col, c.outliers.top[i].col) << where << " top " << i;
    }
    ASSERT_EQ(gpu.errors.size(), cpu.errors.size());
    for (std::size_t k = 0; k < cpu.errors.size(); ++k) {
        const ErrorStats &ge = gpu.errors[k], &ce = cpu.errors[k];
        const std::string w = where + " " + ce.recipe;
        EXPECT_EQ(ge.recipe, ce.recipe);
        expect_same_bits(ge.amax, ce.amax, w + " amax");
        expect_same_bits(ge.underflow_pct, ce.underflow_pct, w + " underflow");
        expect_same_bits(ge.overflow_pct, ce.overflow_pct, w + " overflow");
        EXPECT_EQ(ge.nonfinite_out, ce.nonfinite_out) << w;
        expect_same_bits(ge.scale_inv_min, ce.scale_inv_min, w + " scale_inv min");
        expect_same_bits(ge.scale_inv_max, ce.scale_inv_max, w + " scale_inv max");
        expect_close(ge.mse, ce.mse, w + " mse");
        // dB: 1e-5 relative on the power ratio is 4.3e-5 dB, also where the SQNR is near 0.
        if (std::isfinite(ce.sqnr_db)) EXPECT_NEAR(ge.sqnr_db, ce.sqnr_db, 5e-5) << w << " sqnr";
        else expect_close(ge.sqnr_db, ce.sqnr_db, w + " sqnr");
        expect_close(ge.rel_l2, ce.rel_l2, w + " rel_l2");
        expect_close(ge.max_abs_err, ce.max_abs_err, w + " max_abs_err");
        expect_close(ge.cosine, ce.cosine, w + " cosine");
    }
    const TileMaps &gm = gpu.maps, &cm = cpu.maps;
    EXPECT_EQ(gm.tile_rows, cm.tile_rows) << where;
    EXPECT_EQ(gm.tile_cols, cm.tile_cols) << where;
    EXPECT_EQ(gm.grid_rows, cm.grid_rows) << where;
    EXPECT_EQ(gm.grid_cols, cm.grid_cols) << where;
    EXPECT_EQ(gm.absmax, cm.absmax) << where << " tile absmax";
    ASSERT_EQ(gm.recipes.size(), cm.recipes.size()) << where;
    for (std::size_t k = 0; k < cm.recipes.size(); ++k) {
        const std::string w = where + " map " + cpu.errors[k].recipe;
        ASSERT_EQ(gm.recipes[k].scale_inv.size(), cm.recipes[k].scale_inv.size()) << w;
        for (std::size_t i = 0; i < cm.recipes[k].scale_inv.size(); ++i) {
            expect_same_bits(gm.recipes[k].scale_inv[i], cm.recipes[k].scale_inv[i], w + " scale_inv");
            expect_close(gm.recipes[k].signal[i], cm.recipes[k].signal[i], w + " signal");
            expect_close(gm.recipes[k].error[i], cm.recipes[k].error[i], w + " error");
        }
    }
}

struct Case {
    std::int64_t rows, cols;
    Fill fill;
};

void check(CudaBackend& gpu, const Case& c, DType dtype, bool transposed, int top_k, bool maps) {
    // Stored (rows, cols), or (cols, rows) for a transposed view of (rows, cols).
    const std::int64_t n = c.rows * c.cols;
    std::vector<float> stored = make_values(n, c.fill, unsigned(c.rows * 31 + c.cols));
    std::vector<std::uint16_t> raw(stored.size());
    if (dtype == DType::BF16) {
        for (std::size_t i = 0; i < stored.size(); ++i) {
            raw[i] = float_to_bf16(stored[i]);
            stored[i] = bf16_to_float(raw[i]);
        }
    }
    std::vector<float> view(stored.size());
    for (std::int64_t r = 0; r < c.rows; ++r)
        for (std::int64_t col = 0; col < c.cols; ++col)
            view[std::size_t(r * c.cols + col)] =
                transposed ? stored[std::size_t(col * c.rows + r)] : stored[std::size_t(r * c.cols + col)];

    const std::size_t bytes = stored.size() * dtype_size(dtype);
    void* d = gpu.allocate(bytes);
    gpu.copy_from_host(d, dtype == DType::BF16 ? static_cast<const void*>(raw.data()) : stored.data(), bytes);
    const std::vector<Recipe> r = recipes();
    StatsOptions opt;
    opt.top_k = top_k;
    const AnalysisExtras extras = extras_for(r, maps);
    const Analysis got = gpu.analyze({d, dtype, c.rows, c.cols, Device::CUDA, transposed}, r, opt, extras);
    gpu.release(d);
    const Analysis want = analyze(MatrixView{view.data(), c.rows, c.cols}, r, opt, extras);
    expect_analysis_equal(got, want,
                          std::to_string(c.rows) + "x" + std::to_string(c.cols) + " " + dtype_name(dtype) +
                              (transposed ? " transposed" : "") + " fill " + std::to_string(int(c.fill)));
}

TEST(CudaAnalysis, EqualsTheCpuAnalysis) {
    FP8SCOPE_REQUIRE_GPU();
    CudaBackend gpu;
    const Case cases[] = {
        {1, 1, Fill::Gaussian},    {3, 200, Fill::Gaussian},   {130, 257, Fill::Specials},
        {257, 129, Fill::Gaussian}, {300, 520, Fill::Specials}, {129, 131, Fill::Zeros},
        {64, 300, Fill::Tiny},      {200, 333, Fill::Saturating}, {190, 270, Fill::Offset},
    };
    for (const Case& c : cases)
        for (DType t : {DType::F32, DType::BF16})
            for (bool transposed : {false, true}) check(gpu, c, t, transposed, 16, true);
}

TEST(CudaAnalysis, TopValuesWithTiesAndLargeK) {
    FP8SCOPE_REQUIRE_GPU();
    CudaBackend gpu;
    // All-zero and saturating tensors tie everywhere: ranks go by position.
    for (int k : {0, 1, 40, 256}) {
        check(gpu, {260, 390, Fill::Zeros}, DType::BF16, false, k, false);
        check(gpu, {260, 390, Fill::Saturating}, DType::F32, true, k, false);
        check(gpu, {700, 300, Fill::Specials}, DType::BF16, true, k, false);
    }
}

TEST(CudaAnalysis, ALargeTensorOfManyTiles) {
    FP8SCOPE_REQUIRE_GPU();
    CudaBackend gpu;
    check(gpu, {2050, 1500, Fill::Specials}, DType::BF16, false, 16, true);
    check(gpu, {1500, 2050, Fill::Gaussian}, DType::BF16, true, 16, false);
}

}  // namespace
}  // namespace fp8scope
