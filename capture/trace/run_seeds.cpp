// Run seeds from the trace's config.
#include "run_seeds.h"

#include <nlohmann/json.hpp>

namespace fp8scope::trace {

RunSeeds run_seeds(const TraceMeta& meta) {
    RunSeeds out;
    const nlohmann::json config = nlohmann::json::parse(meta.config_json, nullptr, false);
    if (!config.is_object()) return out;
    const auto seeds = config.find("seeds"), seed = config.find("seed");
    if (seeds == config.end() || !seeds->is_number_integer() || seed == config.end() || !seed->is_number_unsigned())
        return out;
    const std::int64_t n = seeds->get<std::int64_t>();
    const std::int64_t runs = std::int64_t(meta.runs.size());
    if (n < 2 || runs == 0 || runs % n != 0) return out;
    out.per_recipe = int(n);
    for (std::int64_t r = 0; r < runs; ++r) out.seed.push_back(seed->get<std::uint64_t>() + std::uint64_t(r % n));
    return out;
}

}  // namespace fp8scope::trace

namespace fp8scope::trace {

std::optional<SeedGaps> seed_gaps(const TraceMeta& meta, const std::vector<stats::RunLosses>& runs) {
    const RunSeeds seeds = run_seeds(meta);
    const int baseline = baseline_of(meta);
    if (seeds.per_recipe < 2 || baseline < 0 || runs.size() != seeds.seed.size()) return std::nullopt;
    SeedGaps s;
    s.comparison = stats::compare_seeds(runs, seeds.per_recipe, seeds.recipe_of(baseline));
    s.first_seed = seeds.seed.front();
    for (int g = 0; g < seeds.recipes(); ++g) {
        const std::string& name = meta.runs[std::size_t(g * seeds.per_recipe)].name;
        s.recipes.push_back(name.substr(0, name.rfind(" s")));
    }
    return s;
}

}  // namespace fp8scope::trace
