// Every recipe's gap to the baseline over seeds, on the eval or the smoothed training loss.
#include "stats/seed_comparison.h"

#include <algorithm>
#include <cstddef>

#include "stats/smoothing.h"

namespace fp8scope::stats {
namespace {

int evaluations(const RunLosses& r) {
    return int(std::count_if(r.eval.begin(), r.eval.end(), [](double v) { return std::isfinite(v); }));
}

// The run's value of `v` at each of `steps` (NaN where it has none).
std::vector<double> at_steps(const RunLosses& r, const std::vector<double>& v, const std::vector<double>& steps) {
    std::vector<double> out(steps.size(), NAN);
    std::size_t i = 0;
    for (std::size_t j = 0; j < steps.size(); ++j) {
        while (i < r.step.size() && r.step[i] < steps[j]) ++i;
        if (i < r.step.size() && r.step[i] == steps[j] && i < v.size()) out[j] = v[i];
    }
    return out;
}

}  // namespace

const char* gap_series_name(GapSeries s) {
    return s == GapSeries::EvalLoss ? "eval loss" : "training loss (EMA 20)";
}

SeedComparison compare_seeds(const std::vector<RunLosses>& runs, int seeds, int baseline, double confidence) {
    SeedComparison out;
    out.seeds = std::max(seeds, 1);
    out.baseline = baseline;
    const int recipes = int(runs.size()) / out.seeds;
    if (baseline < 0 || baseline >= recipes) return out;
    const RunLosses& first = runs[std::size_t(baseline * out.seeds)];
    out.series = evaluations(first) >= 2 ? GapSeries::EvalLoss : GapSeries::SmoothedTrainLoss;
    // Every run's series, at the points of the baseline's first seed.
    std::vector<double> steps;
    std::vector<std::vector<double>> series;
    for (const RunLosses& r : runs) {
        std::vector<double> v = out.series == GapSeries::EvalLoss ? r.eval : ema(r.loss, kGapEmaSpan);
        if (&r == &first)
            for (std::size_t i = 0; i < r.step.size() && i < v.size(); ++i)
                if (std::isfinite(v[i])) steps.push_back(r.step[i]);
        series.push_back(std::move(v));
    }
    std::vector<std::vector<std::vector<double>>> by_recipe(static_cast<std::size_t>(recipes));  // [recipe][seed][point]
    for (int r = 0; r < recipes * out.seeds; ++r)
        by_recipe[std::size_t(r / out.seeds)].push_back(at_steps(runs[std::size_t(r)], series[std::size_t(r)], steps));
    out.gap.resize(std::size_t(recipes));
    for (int g = 0; g < recipes; ++g)
        if (g != baseline) out.gap[std::size_t(g)] = gap_curve(steps, by_recipe[std::size_t(g)], by_recipe[std::size_t(baseline)], confidence);
    return out;
}

}  // namespace fp8scope::stats
