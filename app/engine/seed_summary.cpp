// The gap table of a seeded comparison.
#include "seed_summary.h"

#include <cstdio>


namespace fp8scope::cli {
namespace {

nlohmann::json number(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); }

std::string signed_text(double v, const char* format) {
    if (!std::isfinite(v)) return "-";
    char buf[32];
    std::snprintf(buf, sizeof buf, format, v);
    return buf;
}

}  // namespace

void print_seed_table(const trace::SeedGaps& s) {
    const stats::SeedComparison& c = s.comparison;
    std::printf("\nseeds %llu..%llu, each recipe paired with %s of the same seed; gap: mean over the seeds of "
                "%s minus the baseline's, at the last point, with its %.0f%% confidence interval (Student t)\n",
                static_cast<unsigned long long>(s.first_seed),
                static_cast<unsigned long long>(s.first_seed + std::uint64_t(c.seeds) - 1),
                s.recipes[std::size_t(c.baseline)].c_str(), stats::gap_series_name(c.series), 100 * stats::kConfidence);
    std::printf("%-14s %11s %9s %25s %12s %12s\n", "recipe", "mean_gap", "gap_%", "95%_CI", "significant",
                "leaves_band");
    for (std::size_t g = 0; g < c.gap.size(); ++g) {
        if (int(g) == c.baseline) continue;
        const stats::PairedDifference d = c.gap[g].final();
        const std::optional<double> first = c.gap[g].first_outside();
        char ci[64] = "-";
        if (std::isfinite(d.half_width)) std::snprintf(ci, sizeof ci, "[%+.5f, %+.5f]", d.lo(), d.hi());
        std::printf("%-14s %11s %9s %25s %12s %12s\n", s.recipes[g].c_str(), signed_text(d.mean, "%+.5f").c_str(),
                    signed_text(d.percent(), "%+.3f%%").c_str(), ci, d.significant() ? "yes" : "no",
                    first ? signed_text(*first, "%.0f").c_str() : "-");
    }
}

nlohmann::json seed_json(const trace::SeedGaps& s) {
    const stats::SeedComparison& c = s.comparison;
    nlohmann::json out = {{"seeds", c.seeds},
                          {"first_seed", s.first_seed},
                          {"series", stats::gap_series_name(c.series)},
                          {"confidence", stats::kConfidence},
                          {"baseline", s.recipes[std::size_t(c.baseline)]}};
    out["recipes"] = nlohmann::json::array();
    for (std::size_t g = 0; g < c.gap.size(); ++g) {
        if (int(g) == c.baseline) continue;
        const stats::PairedDifference d = c.gap[g].final();
        const std::optional<double> first = c.gap[g].first_outside();
        nlohmann::json curve = nlohmann::json::array();
        for (std::size_t j = 0; j < c.gap[g].at.size(); ++j) {
            const stats::PairedDifference& p = c.gap[g].at[j];
            curve.push_back({{"step", c.gap[g].step[j]}, {"mean", number(p.mean)}, {"lo", number(p.lo())},
                             {"hi", number(p.hi())}});
        }
        out["recipes"].push_back({{"recipe", s.recipes[g]},
                                  {"pairs", d.n},
                                  {"mean_gap", number(d.mean)},
                                  {"gap_pct", number(d.percent())},
                                  {"sd", number(d.sd)},
                                  {"ci", {number(d.lo()), number(d.hi())}},
                                  {"significant", d.significant()},
                                  {"first_step_outside", first ? nlohmann::json(*first) : nlohmann::json()},
                                  {"curve", std::move(curve)}});
    }
    return out;
}

}  // namespace fp8scope::cli
