// Is a recipe's loss gap to the baseline real or seed noise? Every recipe trains once per
// seed, paired with the baseline run of the same seed (same initial weights, same batches),
// so d_i = loss(recipe, seed i) - loss(baseline, seed i) removes what the seeds share and
// its mean over the seeds carries a Student t confidence interval. Pure functions.
#pragma once

#include <cmath>
#include <optional>
#include <vector>

namespace fp8scope::stats {

// The mean of the paired differences, with its confidence interval
// mean +- t_{(1 + confidence) / 2, n - 1} * sd / sqrt(n) (sd: the sample standard deviation).
struct PairedDifference {
    int n = 0;                      // pairs with both values finite
    double mean = NAN, sd = NAN;    // sd needs n >= 2
    double half_width = NAN;        // of the interval; NaN below 2 pairs
    double baseline_mean = NAN;     // the baseline's mean over those pairs, for the gap in %
    double lo() const { return mean - half_width; }
    double hi() const { return mean + half_width; }
    double percent() const { return 100.0 * mean / baseline_mean; }
    // The interval excludes 0: the gap is larger than the seeds' noise.
    bool significant() const { return n >= 2 && (lo() > 0 || hi() < 0); }
};

inline constexpr double kConfidence = 0.95;

// recipe[i] and baseline[i] are the losses of seed i; a pair with a non-finite value is
// left out.
PairedDifference paired_difference(const std::vector<double>& recipe, const std::vector<double>& baseline,
                                   double confidence = kConfidence);

// A recipe's paired difference at every point of a loss curve. recipe[i][j] and
// baseline[i][j]: the losses of seed i at step[j].
struct GapCurve {
    std::vector<double> step;
    std::vector<PairedDifference> at;
    // The last point: the gap at the end of training (empty without points).
    PairedDifference final() const { return at.empty() ? PairedDifference{} : at.back(); }
    // The first step from which on every interval excludes 0 (the first step the gap
    // leaves the seeds' noise band and stays out); none when the last one does not.
    std::optional<double> first_outside() const;
};
GapCurve gap_curve(const std::vector<double>& step, const std::vector<std::vector<double>>& recipe,
                   const std::vector<std::vector<double>>& baseline, double confidence = kConfidence);

}  // namespace fp8scope::stats
