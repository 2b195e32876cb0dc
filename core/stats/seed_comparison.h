// A lock-step comparison trained with several seeds per recipe (train --seeds N): every
// recipe's paired gap to the baseline over the seeds (paired_difference.h), on one loss
// series for all: the eval loss where the runs were evaluated at least twice, else the
// training loss smoothed by an EMA (the eval loss of a single final evaluation has no curve).
#pragma once

#include <string>
#include <vector>

#include "stats/paired_difference.h"

namespace fp8scope::stats {

// One run's losses by step: the training loss of every step, the eval loss (NaN where not
// evaluated).
struct RunLosses {
    std::vector<double> step, loss, eval;
};

enum class GapSeries { EvalLoss, SmoothedTrainLoss };
const char* gap_series_name(GapSeries s);  // "eval loss", "training loss (EMA 20)"

inline constexpr int kGapEmaSpan = 20;

struct SeedComparison {
    GapSeries series = GapSeries::EvalLoss;
    int seeds = 1;
    int baseline = -1;          // the baseline's recipe (group)
    std::vector<GapCurve> gap;  // per recipe; the baseline's is empty
};

// `runs` grouped by recipe: run r is recipe r / seeds with the (r % seeds)-th seed. The
// points are the steps of the baseline's first seed that have the series' value.
SeedComparison compare_seeds(const std::vector<RunLosses>& runs, int seeds, int baseline,
                             double confidence = kConfidence);

}  // namespace fp8scope::stats
