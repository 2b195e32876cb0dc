// The seeds of a trace's runs. `train --seeds N` trains every recipe of its comparison with
// seeds seed .. seed + N - 1, the runs of one recipe in a row ("mxfp8 s1", "mxfp8 s2", ...);
// the trace's config holds seed and seeds (absent: one seed), which is all it takes to
// know every run's seed, in a file as on the live stream.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "stats/seed_comparison.h"
#include "trace_records.h"

namespace fp8scope::trace {

struct RunSeeds {
    int per_recipe = 1;               // N; 1 for a trace of one seed
    std::vector<std::uint64_t> seed;  // every run's seed; empty for one seed
    int recipes() const { return int(seed.size()) / per_recipe; }
    int recipe_of(int run) const { return run / per_recipe; }  // the recipe's place in the comparison
};

// From meta.config_json; one seed when the config does not parse, has no seeds or its runs
// do not divide into them.
RunSeeds run_seeds(const TraceMeta& meta);

// Every recipe's gap to the baseline over the seeds (stats/seed_comparison.h), as the
// engine's summary, inspect and the GUI's Loss view give it.
struct SeedGaps {
    stats::SeedComparison comparison;
    std::vector<std::string> recipes;  // by the names of their runs: "mxfp8 s1" is "mxfp8"
    std::uint64_t first_seed = 0;
};
// None for a trace of one seed or without a baseline run. `runs`: every run's losses.
std::optional<SeedGaps> seed_gaps(const TraceMeta& meta, const std::vector<stats::RunLosses>& runs);

}  // namespace fp8scope::trace
