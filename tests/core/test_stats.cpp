// tensor_stats() and error_stats() against the float64 reference on the shape x data
// grid, and on small hand-checked tensors.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "cpu/quantize.h"
#include "cpu/stats.h"
#include "reference/reference.h"

namespace fp8scope {
namespace {

using ref::close;
using ref::DataKind;

constexpr double kSumTol = 1e-9;

void expect_tensor_stats_equal(const TensorStats& got, const TensorStats& want) {
    EXPECT_EQ(got.numel, want.numel);
    EXPECT_EQ(got.finite, want.finite);
    EXPECT_EQ(got.nan, want.nan);
    EXPECT_EQ(got.inf, want.inf);
    EXPECT_EQ(got.zero, want.zero);
    EXPECT_EQ(got.amax, want.amax);
    EXPECT_EQ(got.min_nonzero_abs, want.min_nonzero_abs);
    // The mean of zero-mean data cancels: compare it on the scale of the rms.
    if (std::isnan(want.mean)) EXPECT_TRUE(std::isnan(got.mean));
    else EXPECT_NEAR(got.mean, want.mean, kSumTol * (std::fabs(want.mean) + want.rms));
    EXPECT_TRUE(close(got.rms, want.rms, kSumTol)) << got.rms << " vs " << want.rms;
    EXPECT_TRUE(close(got.stddev, want.stddev, kSumTol)) << got.stddev << " vs " << want.stddev;
    EXPECT_TRUE(close(got.dynamic_range, want.dynamic_range, 1e-12));
    EXPECT_EQ(got.histogram.bins, want.histogram.bins);
    EXPECT_EQ(got.histogram.zero, want.histogram.zero);
    EXPECT_EQ(got.histogram.nan, want.histogram.nan);
    EXPECT_EQ(got.histogram.inf, want.histogram.inf);
    EXPECT_TRUE(close(got.outliers.kurtosis, want.outliers.kurtosis, kSumTol))
        << got.outliers.kurtosis << " vs " << want.outliers.kurtosis;
    EXPECT_EQ(got.outliers.k, want.outliers.k);
    EXPECT_TRUE(close(got.outliers.frac_beyond_k_rms, want.outliers.frac_beyond_k_rms, 1e-12));
    EXPECT_EQ(got.outliers.channel_absmax, want.outliers.channel_absmax);
    ASSERT_EQ(got.outliers.top.size(), want.outliers.top.size());
    for (std::size_t i = 0; i < got.outliers.top.size(); ++i) {
        EXPECT_EQ(got.outliers.top[i].value, want.outliers.top[i].value) << i;
        EXPECT_EQ(got.outliers.top[i].row, want.outliers.top[i].row) << i;
        EXPECT_EQ(got.outliers.top[i].col, want.outliers.top[i].col) << i;
    }
}

void expect_error_stats_equal(const ErrorStats& got, const ErrorStats& want, double tol) {
    EXPECT_EQ(got.amax, want.amax);
    EXPECT_TRUE(close(got.mse, want.mse, tol)) << got.mse << " vs " << want.mse;
    EXPECT_TRUE(close(got.sqnr_db, want.sqnr_db, tol)) << got.sqnr_db << " vs " << want.sqnr_db;
    EXPECT_TRUE(close(got.rel_l2, want.rel_l2, tol)) << got.rel_l2 << " vs " << want.rel_l2;
    EXPECT_TRUE(close(got.max_abs_err, want.max_abs_err, 0)) << got.max_abs_err << " vs " << want.max_abs_err;
    EXPECT_TRUE(close(got.cosine, want.cosine, tol)) << got.cosine << " vs " << want.cosine;
    EXPECT_TRUE(close(got.underflow_pct, want.underflow_pct, 1e-12));
    EXPECT_TRUE(close(got.overflow_pct, want.overflow_pct, 1e-12));
    EXPECT_TRUE(close(got.scale_inv_min, want.scale_inv_min, 0));
    EXPECT_TRUE(close(got.scale_inv_max, want.scale_inv_max, 0));
    EXPECT_EQ(got.nonfinite_out, want.nonfinite_out);
}

struct Shape {
    std::int64_t rows, cols;
};

class StatsGrid : public ::testing::TestWithParam<std::tuple<Shape, DataKind>> {};

TEST_P(StatsGrid, TensorAndErrorStatsMatchReference) {
    const auto [shape, kind] = GetParam();
    const std::vector<float> data = ref::make_data(kind, shape.rows, shape.cols, 11);
    const MatrixView x{data.data(), shape.rows, shape.cols};
    StatsOptions opt;
    opt.outlier_k = 3.0;
    opt.top_k = 20;
    opt.threads = 2;
    expect_tensor_stats_equal(tensor_stats(x, opt), ref::tensor_stats(x, opt.outlier_k, opt.top_k));

    std::vector<Recipe> recipes = default_analysis_recipes();
    recipes.push_back(DelayedScaling{});
    recipes.push_back(CurrentScaling{Format::E5M2, 1e-3f, true});
    for (const Recipe& r : recipes) {
        SCOPED_TRACE(recipe_name(r));
        const ErrorStats got = error_stats(x, quantize(x, r), recipe_name(r));
        EXPECT_EQ(got.recipe, recipe_name(r));
        expect_error_stats_equal(got, ref::error_stats(x, ref::quantize(x, r)), kSumTol);
    }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, StatsGrid,
    ::testing::Combine(::testing::Values(Shape{1, 16}, Shape{217, 256}, Shape{300, 200}, Shape{128, 4096},
                                         Shape{3, 1}, Shape{257, 2100}, Shape{0, 4}),
                       ::testing::Values(DataKind::Gaussian, DataKind::OutlierColumns, DataKind::Tiny,
                                         DataKind::MixedZeros, DataKind::NonFinite)),
    [](const auto& info) {
        const Shape s = std::get<0>(info.param);
        return std::to_string(s.rows) + "x" + std::to_string(s.cols) + "_" +
               ref::data_kind_name(std::get<1>(info.param));
    });

TEST(TensorStats, HandChecked) {
    const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
    std::vector<float> x = {1.0f, -2.0f, 0.0f, 4.0f, nan, inf, 0.5f, 3.0f};
    StatsOptions opt;
    opt.top_k = 3;
    opt.outlier_k = 1.0;
    const TensorStats t = tensor_stats(MatrixView{x.data(), 2, 4}, opt);
    EXPECT_EQ(t.numel, 8);
    EXPECT_EQ(t.finite, 6);
    EXPECT_EQ(t.nan, 1);
    EXPECT_EQ(t.inf, 1);
    EXPECT_EQ(t.zero, 1);
    EXPECT_EQ(t.amax, 4.0);
    EXPECT_EQ(t.min_nonzero_abs, 0.5);
    EXPECT_DOUBLE_EQ(t.mean, 6.5 / 6);
    EXPECT_DOUBLE_EQ(t.rms, std::sqrt(30.25 / 6));  // 1 + 4 + 16 + 0.25 + 9
    EXPECT_DOUBLE_EQ(t.dynamic_range, 3.0);
    EXPECT_EQ(t.histogram.count(-1), 1);
    EXPECT_EQ(t.histogram.count(0), 1);
    EXPECT_EQ(t.histogram.count(1), 2);
    EXPECT_EQ(t.histogram.count(2), 1);
    EXPECT_EQ(t.histogram.zero, 1);
    EXPECT_EQ(t.histogram.nan, 1);
    EXPECT_EQ(t.histogram.inf, 1);
    // rms = 2.28: |4| and |3| are beyond 1 * rms.
    EXPECT_DOUBLE_EQ(t.outliers.frac_beyond_k_rms, 2.0 / 6);
    // Columns: {1, nan}, {-2, inf}, {0, 0.5}, {4, 3}.
    EXPECT_EQ(t.outliers.channel_absmax, (std::vector<float>{1.0f, 2.0f, 0.5f, 4.0f}));
    ASSERT_EQ(t.outliers.top.size(), 3u);
    EXPECT_EQ(t.outliers.top[0].value, 4.0f);
    EXPECT_EQ(t.outliers.top[0].col, 3);
    EXPECT_EQ(t.outliers.top[1].value, 3.0f);
    EXPECT_EQ(t.outliers.top[1].row, 1);
    EXPECT_EQ(t.outliers.top[1].col, 3);
    EXPECT_EQ(t.outliers.top[2].value, -2.0f);
}

TEST(TensorStats, SubnormalHistogramAndTies) {
    std::vector<float> x = {0x1p-149f, 0x1.8p-148f, -5.0f, 5.0f, 0x1p-127f, 5.0f};
    StatsOptions opt;
    opt.top_k = 2;
    const TensorStats t = tensor_stats(MatrixView{x.data(), 1, 6}, opt);
    EXPECT_EQ(t.histogram.count(-149), 1);
    EXPECT_EQ(t.histogram.count(-148), 1);
    EXPECT_EQ(t.histogram.count(-127), 1);
    EXPECT_EQ(t.histogram.count(2), 3);
    EXPECT_EQ(t.min_nonzero_abs, static_cast<double>(0x1p-149f));
    // Equal |x|: the earlier position ranks first.
    ASSERT_EQ(t.outliers.top.size(), 2u);
    EXPECT_EQ(t.outliers.top[0].value, -5.0f);
    EXPECT_EQ(t.outliers.top[0].col, 2);
    EXPECT_EQ(t.outliers.top[1].col, 3);
}

TEST(TensorStats, KurtosisOfTwoPointDistributionIsOne) {
    std::vector<float> x = {1, -1, 1, -1, 1, -1};
    EXPECT_DOUBLE_EQ(tensor_stats(MatrixView{x.data(), 1, 6}).outliers.kurtosis, 1.0);
    std::vector<float> c(10, 2.0f);  // constant: no spread, kurtosis undefined
    EXPECT_TRUE(std::isnan(tensor_stats(MatrixView{c.data(), 2, 5}).outliers.kurtosis));
}

TEST(ErrorStats, PerfectAndUndefined) {
    // Values on the E4M3 grid at scale 1 (amax 448): exact, sqnr +Inf.
    std::vector<float> x = {448.0f, 1.0f, -0.5f, 0.0f};
    const ErrorStats e = error_stats(MatrixView{x.data(), 1, 4}, quantize(MatrixView{x.data(), 1, 4}, CurrentScaling{}), "c");
    EXPECT_EQ(e.mse, 0.0);
    EXPECT_EQ(e.sqnr_db, std::numeric_limits<double>::infinity());
    EXPECT_EQ(e.cosine, 1.0);
    EXPECT_EQ(e.underflow_pct, 0.0);
    std::vector<float> z(4, 0.0f);
    const ErrorStats ez = error_stats(MatrixView{z.data(), 2, 2}, quantize(MatrixView{z.data(), 2, 2}, CurrentScaling{}), "c");
    EXPECT_TRUE(std::isnan(ez.sqnr_db));
    EXPECT_TRUE(std::isnan(ez.cosine));
    EXPECT_TRUE(std::isnan(ez.underflow_pct));
    EXPECT_EQ(ez.mse, 0.0);
}

TEST(ErrorStats, UnderflowAndOverflowCounts) {
    // Delayed first step, s = 1: 1e-4 flushes to zero in E4M3, 1000 saturates.
    std::vector<float> x = {1e-4f, 1000.0f, 2.0f, 0.0f};
    const MatrixView v{x.data(), 1, 4};
    const ErrorStats e = error_stats(v, quantize(v, DelayedScaling{}), "d");
    EXPECT_DOUBLE_EQ(e.underflow_pct, 100.0 / 3);
    EXPECT_DOUBLE_EQ(e.overflow_pct, 25.0);
    EXPECT_EQ(e.max_abs_err, 552.0);
    EXPECT_EQ(e.scale_inv_min, 1.0);
}

TEST(ErrorStats, ShapeMismatchIsAnError) {
    std::vector<float> x(8, 1.0f);
    const QuantizedTensor q = quantize(MatrixView{x.data(), 2, 4}, CurrentScaling{});
    EXPECT_THROW(error_stats(MatrixView{x.data(), 4, 2}, q, "current_e4m3"), std::invalid_argument);
}

}  // namespace
}  // namespace fp8scope
