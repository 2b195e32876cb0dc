// The end of a comparison trained with several seeds (train --seeds N) and of its trace
// (inspect): per recipe its paired gap to the baseline over the seeds (stats/), as a text
// table and as JSON (trace::seed_gaps computes them).
#pragma once

#include <nlohmann/json.hpp>

#include "run_seeds.h"

namespace fp8scope::cli {

void print_seed_table(const trace::SeedGaps& s);
nlohmann::json seed_json(const trace::SeedGaps& s);

}  // namespace fp8scope::cli
