// The fused analyze() against quantize() + error_stats() and against the float64
// reference, for every recipe on the shape x data grid; and its independence of the
// thread count (bitwise).
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <limits>
#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include "cpu/analysis.h"
#include "cpu/stats.h"
#include "fp8/format.h"
#include "cpu/quantize.h"
#include "reference/reference.h"

namespace fp8scope {
namespace {

using ref::close;
using ref::DataKind;

struct Shape {
    std::int64_t rows, cols;
};

std::vector<Recipe> analysis_recipes() {
    std::vector<Recipe> r = default_analysis_recipes();
    r.push_back(DelayedScaling{});
    r.push_back(DelayedScaling{Format::E4M3, 16, AmaxAlgo::MostRecent, 2});
    r.push_back(BlockScaling{Format::E5M2, 1, 128, false});
    r.push_back(CurrentScaling{Format::E4M3, 1e-3f, true});
    r.push_back(BlockScaling{Format::E4M3, 3, 40, false});
    r.push_back(MXScaling{Format::E5M2, MXRule::Floor, 16});
    return r;
}

void expect_close(const ErrorStats& got, const ErrorStats& want, double tol) {
    EXPECT_EQ(got.recipe, want.recipe);
    EXPECT_EQ(got.amax, want.amax);
    EXPECT_TRUE(close(got.mse, want.mse, tol)) << got.mse << " vs " << want.mse;
    EXPECT_TRUE(close(got.sqnr_db, want.sqnr_db, tol)) << got.sqnr_db << " vs " << want.sqnr_db;
    EXPECT_TRUE(close(got.rel_l2, want.rel_l2, tol));
    EXPECT_EQ(std::isnan(got.max_abs_err), std::isnan(want.max_abs_err));
    if (!std::isnan(want.max_abs_err)) {
        EXPECT_EQ(got.max_abs_err, want.max_abs_err);
    }
    EXPECT_TRUE(close(got.cosine, want.cosine, tol)) << got.cosine << " vs " << want.cosine;
    EXPECT_TRUE(close(got.underflow_pct, want.underflow_pct, 1e-12));
    EXPECT_TRUE(close(got.overflow_pct, want.overflow_pct, 1e-12));
    EXPECT_TRUE(close(got.scale_inv_min, want.scale_inv_min, 0));
    EXPECT_TRUE(close(got.scale_inv_max, want.scale_inv_max, 0));
    EXPECT_EQ(got.nonfinite_out, want.nonfinite_out);
}

class AnalysisGrid : public ::testing::TestWithParam<std::tuple<Shape, DataKind>> {};

TEST_P(AnalysisGrid, AgreesWithQuantizePlusErrorStatsAndReference) {
    const auto [shape, kind] = GetParam();
    const std::vector<float> data = ref::make_data(kind, shape.rows, shape.cols, 23);
    const MatrixView x{data.data(), shape.rows, shape.cols};
    const std::vector<Recipe> recipes = analysis_recipes();
    StatsOptions opt;
    opt.threads = 2;
    const Analysis a = analyze(x, recipes, opt);
    ASSERT_EQ(a.errors.size(), recipes.size());
    for (std::size_t k = 0; k < recipes.size(); ++k) {
        const std::string name = recipe_name(recipes[k]);
        SCOPED_TRACE(name);
        expect_close(a.errors[k], error_stats(x, quantize(x, recipes[k]), name), 1e-12);
        ErrorStats want = ref::error_stats(x, ref::quantize(x, recipes[k]));
        want.recipe = name;
        expect_close(a.errors[k], want, 1e-9);
    }
    // The tensor part is tensor_stats(), whatever the recipes (same tiling by default).
    const TensorStats t = tensor_stats(x, opt);
    EXPECT_EQ(a.tensor.histogram.bins, t.histogram.bins);
    EXPECT_TRUE(close(a.tensor.stddev, t.stddev, 1e-12));
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, AnalysisGrid,
    ::testing::Combine(::testing::Values(Shape{1, 16}, Shape{217, 256}, Shape{300, 200}, Shape{128, 4096},
                                         Shape{3, 1}, Shape{129, 2100}, Shape{1, 5000}, Shape{0, 3}),
                       ::testing::Values(DataKind::Gaussian, DataKind::OutlierColumns, DataKind::Tiny,
                                         DataKind::MixedZeros, DataKind::NonFinite)),
    [](const auto& info) {
        const Shape s = std::get<0>(info.param);
        return std::to_string(s.rows) + "x" + std::to_string(s.cols) + "_" +
               ref::data_kind_name(std::get<1>(info.param));
    });

bool bitwise_equal(double a, double b) { return std::bit_cast<std::uint64_t>(a) == std::bit_cast<std::uint64_t>(b); }

TEST(Analysis, ThreadCountDoesNotChangeAnyBit) {
    const std::vector<float> data = ref::make_data(DataKind::OutlierColumns, 700, 2300, 5);
    const MatrixView x{data.data(), 700, 2300};
    const std::vector<Recipe> recipes = analysis_recipes();
    StatsOptions one;
    one.threads = 1;
    const Analysis a = analyze(x, recipes, one);
    for (int threads : {2, 3, 8}) {
        StatsOptions opt;
        opt.threads = threads;
        const Analysis b = analyze(x, recipes, opt);
        EXPECT_TRUE(bitwise_equal(a.tensor.mean, b.tensor.mean));
        EXPECT_TRUE(bitwise_equal(a.tensor.rms, b.tensor.rms));
        EXPECT_TRUE(bitwise_equal(a.tensor.stddev, b.tensor.stddev));
        EXPECT_TRUE(bitwise_equal(a.tensor.outliers.kurtosis, b.tensor.outliers.kurtosis));
        EXPECT_EQ(a.tensor.histogram.bins, b.tensor.histogram.bins);
        EXPECT_EQ(a.tensor.outliers.channel_absmax, b.tensor.outliers.channel_absmax);
        for (std::size_t k = 0; k < recipes.size(); ++k) {
            EXPECT_TRUE(bitwise_equal(a.errors[k].mse, b.errors[k].mse)) << k << " threads " << threads;
            EXPECT_TRUE(bitwise_equal(a.errors[k].sqnr_db, b.errors[k].sqnr_db)) << k;
            EXPECT_TRUE(bitwise_equal(a.errors[k].cosine, b.errors[k].cosine)) << k;
            EXPECT_TRUE(bitwise_equal(a.errors[k].rel_l2, b.errors[k].rel_l2)) << k;
            EXPECT_TRUE(bitwise_equal(a.errors[k].max_abs_err, b.errors[k].max_abs_err)) << k;
        }
    }
}

TEST(Analysis, DelayedRecipeIsItsFirstStep) {
    // s = 1: everything above 448 saturates, small values keep their E4M3 rounding.
    std::vector<float> x = {1000.0f, 3.0f, -600.0f, 0.25f};
    const Analysis a = analyze(MatrixView{x.data(), 2, 2}, {DelayedScaling{}});
    EXPECT_EQ(a.errors[0].scale_inv_min, 1.0);
    EXPECT_DOUBLE_EQ(a.errors[0].overflow_pct, 50.0);
    EXPECT_EQ(a.errors[0].max_abs_err, 552.0);
}

TEST(Analysis, DelayedScalesComeFromTheCaller) {
    std::vector<float> x = {1000.0f, 3.0f, -600.0f, 0.25f};
    AnalysisExtras extras;
    extras.delayed_scales = {0.25f, std::numeric_limits<float>::quiet_NaN()};
    const Analysis a = analyze(MatrixView{x.data(), 2, 2}, {DelayedScaling{}, DelayedScaling{}}, {}, extras);
    double err = 0;
    for (float v : x) {
        const double q = decode(Format::E4M3, encode(Format::E4M3, v * 0.25f)) * 4.0f;
        err += (q - v) * (q - v);
    }
    EXPECT_EQ(a.errors[0].scale_inv_min, 4.0);
    EXPECT_EQ(a.errors[0].overflow_pct, 0.0);
    EXPECT_DOUBLE_EQ(a.errors[0].mse, err / 4);
    EXPECT_EQ(a.errors[1].scale_inv_min, 1.0);  // NaN: a first step
}

// The tile maps partition the tensor: their cells add up to the tensor's figures, and
// the grid is the sub-tile grid that holds whole blocks of every recipe.
TEST(Analysis, TileMapsPartitionTheTensorsSums) {
    const std::int64_t R = 700, C = 2300;
    std::vector<float> data = ref::make_data(DataKind::OutlierColumns, R, C, 9);
    data[5 * C + 7] = std::numeric_limits<float>::quiet_NaN();
    data[400 * C + 2000] = std::numeric_limits<float>::infinity();
    const MatrixView x{data.data(), R, C};
    const std::vector<Recipe> recipes = analysis_recipes();  // incl. 3x40 blocks: 384 x 640 tiles
    AnalysisExtras extras;
    extras.tile_maps = true;
    const Analysis a = analyze(x, recipes, {}, extras);
    const TileMaps& m = a.maps;
    EXPECT_EQ(m.tile_rows, 384);
    EXPECT_EQ(m.tile_cols, 640);
    ASSERT_EQ(m.grid_rows, 2);
    ASSERT_EQ(m.grid_cols, 4);
    ASSERT_EQ(m.recipes.size(), recipes.size());
    // Cell (1, 3) covers rows 384.. and columns 1920..: its max |x| by hand.
    float tmax = 0;
    for (std::int64_t r = 384; r < R; ++r)
        for (std::int64_t c = 1920; c < C; ++c)
            if (std::isfinite(data[r * C + c])) tmax = std::max(tmax, std::fabs(data[r * C + c]));
    EXPECT_EQ(m.absmax[7], tmax);
    EXPECT_EQ(*std::max_element(m.absmax.begin(), m.absmax.end()), static_cast<float>(a.tensor.amax));
    EXPECT_EQ(a.scaling_amax, std::numeric_limits<float>::infinity());  // NaN ignored, Inf included
    for (std::size_t k = 0; k < recipes.size(); ++k) {
        SCOPED_TRACE(a.errors[k].recipe);
        double sig = 0, err = 0;
        float si = 0;
        for (std::size_t cell = 0; cell < m.absmax.size(); ++cell) {
            sig += m.recipes[k].signal[cell];
            err += m.recipes[k].error[cell];
            if (!std::isnan(m.recipes[k].scale_inv[cell])) si = std::max(si, m.recipes[k].scale_inv[cell]);
        }
        EXPECT_NEAR(10 * std::log10(sig / err), a.errors[k].sqnr_db, 1e-9);
        EXPECT_EQ(si, a.errors[k].scale_inv_max);
    }
    // Without maps, the figures are the same bits.
    const Analysis b = analyze(x, recipes);
    EXPECT_TRUE(b.maps.absmax.empty());
    for (std::size_t k = 0; k < recipes.size(); ++k)
        EXPECT_TRUE(bitwise_equal(a.errors[k].sqnr_db, b.errors[k].sqnr_db));
}

}  // namespace
}  // namespace fp8scope
