// The seeds' statistics: Student t against its table and closed forms, paired differences
// and their intervals against a float64 oracle written out here, a gap curve's first step
// outside the noise band, and which loss series a seeded comparison judges.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <vector>

#include "stats/paired_difference.h"
#include "stats/seed_comparison.h"
#include "stats/student_t.h"

using namespace fp8scope::stats;

TEST(StudentT, QuantilesMatchTheTable) {
    // t_{0.975, dof} as printed in tables (3 decimals) and to 12 digits (R's qt).
    const struct {
        double dof, table, exact;
    } cases[] = {{1, 12.706, 12.7062047361747}, {2, 4.303, 4.30265272974946}, {4, 2.776, 2.77644510519779},
                 {7, 2.365, 2.36462425159278},  {29, 2.045, 2.04522964213270}};
    for (const auto& c : cases) {
        const double t = student_t_quantile(0.975, c.dof);
        EXPECT_NEAR(t, c.table, 5e-4) << "dof " << c.dof;
        EXPECT_NEAR(t, c.exact, 1e-9) << "dof " << c.dof;
    }
    EXPECT_NEAR(student_t_quantile(0.995, 4), 4.60409487134999, 1e-9);
    EXPECT_NEAR(student_t_quantile(0.025, 7), -2.36462425159278, 1e-9);  // symmetric
    EXPECT_NEAR(student_t_quantile(0.975, 1e8), 1.95996398454005, 1e-6);   // the normal's
    EXPECT_TRUE(std::isnan(student_t_quantile(1.0, 3)));
    EXPECT_TRUE(std::isnan(student_t_quantile(0.9, 0)));
}

TEST(StudentT, CdfMatchesClosedForms) {
    for (double t : {-30.0, -2.5, -0.3, 0.0, 0.7, 4.0, 100.0}) {
        // One degree of freedom: Cauchy; two: t / (2 sqrt(2 + t^2)) around 1/2.
        EXPECT_NEAR(student_t_cdf(t, 1), 0.5 + std::atan(t) / std::numbers::pi, 1e-13) << t;
        EXPECT_NEAR(student_t_cdf(t, 2), 0.5 + t / (2 * std::sqrt(2 + t * t)), 1e-13) << t;
    }
    // I_x(a, 1) = x^a, I_x(1, b) = 1 - (1 - x)^b, I_{1/2}(a, a) = 1/2.
    EXPECT_NEAR(incomplete_beta(3.5, 1, 0.3), std::pow(0.3, 3.5), 1e-14);
    EXPECT_NEAR(incomplete_beta(1, 2.5, 0.8), 1 - std::pow(0.2, 2.5), 1e-14);
    EXPECT_NEAR(incomplete_beta(7.25, 7.25, 0.5), 0.5, 1e-14);
    EXPECT_TRUE(std::isnan(incomplete_beta(1, 1, 1.5)));
}

namespace {

// The oracle: mean, sample sd and the interval of d = r - b, in long double, straight from
// their definitions.
struct Oracle {
    long double mean, sd, half;
};
Oracle oracle(const std::vector<double>& r, const std::vector<double>& b, double t) {
    long double sum = 0, ss = 0;
    const std::size_t n = r.size();
    for (std::size_t i = 0; i < n; ++i) sum += (long double)r[i] - b[i];
    const long double mean = sum / n;
    for (std::size_t i = 0; i < n; ++i) ss += ((long double)r[i] - b[i] - mean) * ((long double)r[i] - b[i] - mean);
    const long double sd = std::sqrt(ss / (n - 1));
    return {mean, sd, t * sd / std::sqrt((long double)n)};
}

}  // namespace

TEST(PairedDifference, HandComputedCase) {
    // d = 1, 2, 3: mean 2, sd 1, half width t_{0.975,2} / sqrt(3) = 2.48413771175033.
    const PairedDifference d = paired_difference({2, 4, 6}, {1, 2, 3});
    EXPECT_EQ(d.n, 3);
    EXPECT_DOUBLE_EQ(d.mean, 2.0);
    EXPECT_DOUBLE_EQ(d.sd, 1.0);
    EXPECT_NEAR(d.half_width, 2.48413771175033, 1e-9);
    EXPECT_NEAR(d.lo(), -0.48413771175033, 1e-9);
    EXPECT_FALSE(d.significant());  // the interval holds 0
    EXPECT_DOUBLE_EQ(d.baseline_mean, 2.0);
    EXPECT_DOUBLE_EQ(d.percent(), 100.0);
}

TEST(PairedDifference, AgreesWithTheOracle) {
    const std::vector<double> base = {2.931, 2.944, 2.925, 2.950, 2.938};
    const std::vector<double> recipe = {2.941, 2.955, 2.932, 2.962, 2.946};
    const PairedDifference d = paired_difference(recipe, base);
    const Oracle o = oracle(recipe, base, 2.77644510519779);
    EXPECT_NEAR(d.mean, double(o.mean), 1e-15);
    EXPECT_NEAR(d.sd, double(o.sd), 1e-15);
    EXPECT_NEAR(d.half_width, double(o.half), 1e-12);
    EXPECT_TRUE(d.significant());  // every seed is worse by about 0.01; sd 0.002
    EXPECT_GT(d.lo(), 0);
    // A pair with a missing value is left out: the same as the four others alone.
    std::vector<double> r = recipe, b = base;
    r[2] = NAN;
    const PairedDifference four = paired_difference(r, b);
    r.erase(r.begin() + 2), b.erase(b.begin() + 2);
    const Oracle o4 = oracle(r, b, 3.18244630528371);  // t_{0.975,3}
    EXPECT_EQ(four.n, 4);
    EXPECT_NEAR(four.mean, double(o4.mean), 1e-15);
    EXPECT_NEAR(four.half_width, double(o4.half), 1e-12);
}

TEST(PairedDifference, TooFewSeedsOrNoSpread) {
    const PairedDifference one = paired_difference({3.0}, {2.0});
    EXPECT_EQ(one.n, 1);
    EXPECT_DOUBLE_EQ(one.mean, 1.0);
    EXPECT_TRUE(std::isnan(one.half_width));
    EXPECT_FALSE(one.significant());  // one seed says nothing about the noise
    const PairedDifference same = paired_difference({3.0, 4.0}, {2.5, 3.5});  // d = 0.5 twice
    EXPECT_DOUBLE_EQ(same.half_width, 0.0);
    EXPECT_TRUE(same.significant());
    EXPECT_EQ(paired_difference({}, {}).n, 0);
}

TEST(GapCurve, FirstStepOutsideTheBandAndStayingOut) {
    // Seeds x points; the recipe's gap is noise at 10 and 30, clear at 20, 40 and 50.
    const std::vector<double> step = {10, 20, 30, 40, 50};
    const std::vector<std::vector<double>> base = {{5, 4, 3, 2, 1}, {5, 4, 3, 2, 1}, {5, 4, 3, 2, 1}};
    const std::vector<std::vector<double>> recipe = {
        {5.1, 4.10, 3.1, 2.10, 1.20}, {4.9, 4.11, 2.9, 2.11, 1.21}, {5.0, 4.12, 3.0, 2.12, 1.22}};
    const GapCurve c = gap_curve(step, recipe, base);
    ASSERT_EQ(c.at.size(), 5u);
    EXPECT_FALSE(c.at[0].significant());
    EXPECT_TRUE(c.at[1].significant());
    EXPECT_FALSE(c.at[2].significant());
    ASSERT_TRUE(c.first_outside());
    EXPECT_EQ(*c.first_outside(), 40);  // 20 left the band but came back
    EXPECT_NEAR(c.final().mean, 0.21, 1e-12);
    // Back inside at the end: it never left for good.
    std::vector<std::vector<double>> back = recipe;
    back[1][4] = 0.5;
    EXPECT_FALSE(gap_curve(step, back, base).first_outside());
}

TEST(SeedComparison, JudgesTheEvalLossWhenEvaluatedTwiceElseTheSmoothedTrainingLoss) {
    // Two recipes x two seeds, four steps; the baseline is recipe 1.
    auto run = [](double offset, bool evals) {
        RunLosses r;
        r.step = {1, 2, 3, 4};
        r.loss = {4 + offset, 3 + offset, 2 + offset, 1 + offset};
        r.eval = {NAN, evals ? 3.5 + offset : NAN, NAN, 1.5 + offset};
        return r;
    };
    std::vector<RunLosses> runs = {run(0.30, true), run(0.50, true), run(0.0, true), run(0.1, true)};
    SeedComparison c = compare_seeds(runs, 2, 1);
    EXPECT_EQ(c.series, GapSeries::EvalLoss);
    ASSERT_EQ(c.gap.size(), 2u);
    EXPECT_TRUE(c.gap[1].at.empty());  // the baseline's own
    ASSERT_EQ(c.gap[0].step, (std::vector<double>{2, 4}));
    // d = 0.30 - 0.0 and 0.50 - 0.1 at every point: mean 0.35, sd 0.0707.
    EXPECT_NEAR(c.gap[0].final().mean, 0.35, 1e-12);
    EXPECT_NEAR(c.gap[0].final().sd, std::sqrt(0.005), 1e-12);
    EXPECT_NEAR(c.gap[0].final().baseline_mean, 1.55, 1e-12);

    for (auto& r : runs) r.eval[1] = NAN;  // one evaluation, at the end
    c = compare_seeds(runs, 2, 1);
    EXPECT_EQ(c.series, GapSeries::SmoothedTrainLoss);
    ASSERT_EQ(c.gap[0].step, (std::vector<double>{1, 2, 3, 4}));
    // The EMA of a series shifted by a constant is shifted by it: the same differences.
    EXPECT_NEAR(c.gap[0].final().mean, 0.35, 1e-12);
    const double alpha = 2.0 / 21, ema1 = 4 + alpha * (3 - 4.0), ema2 = ema1 + alpha * (2 - ema1),
                 ema3 = ema2 + alpha * (1 - ema2);  // the baseline's first seed, from 4, 3, 2, 1
    EXPECT_NEAR(c.gap[0].final().baseline_mean, ema3 + 0.05, 1e-12);
}
