// The seeds of a trace's runs. `train --seeds N` trains every recipe of its comparison with
// seeds seed .. seed + N - 1, the runs of one recipe in a row ("mxfp8 s1", "mxfp8 s2", ...);
// the trace's config holds seed and seeds (absent: one seed), which is all it takes to
// know every run's seed, in a file as on the live stream.
#pragma once

#include <cstdint>
#include <vector>

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

}  // namespace fp8scope::trace
