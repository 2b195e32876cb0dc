// The end of a comparison trained with several seeds (train --seeds N) and of its trace
// (inspect): per recipe its paired gap to the baseline over the seeds (stats/), as a text
// table and as JSON.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "stats/seed_comparison.h"
#include "trace_records.h"

namespace fp8scope::cli {

struct SeedSummary {
    stats::SeedComparison comparison;
    std::vector<std::string> recipes;  // the comparison's recipes, by the names of their runs
    std::uint64_t first_seed = 0;
};

// None for a trace of one seed or without a baseline run. `runs`: every run's losses.
std::optional<SeedSummary> seed_summary(const trace::TraceMeta& meta, const std::vector<stats::RunLosses>& runs);

void print_seed_table(const SeedSummary& s);
nlohmann::json seed_json(const SeedSummary& s);

}  // namespace fp8scope::cli
