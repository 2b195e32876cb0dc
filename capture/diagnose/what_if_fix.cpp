// Fixes from the what-if figures: every capture step analyses each operand under every
// quantizer of the trace, so the quantizer another recipe would give this operand has its
// SQNR on the very tensors where the one in use lost it.
#include <algorithm>
#include <cmath>

#include "diagnose_rules.h"
#include "fp8/recipe.h"
#include "fp8/training_recipe.h"
#include "rules.h"

namespace fp8scope::diagnose {
namespace {

// The FP8 recipes a fix may suggest: FP4 would trade precision away, not win it back.
constexpr const char* kCandidates[] = {"mxfp8", "blockwise", "current", "delayed"};

int quantizer_id(const trace::TraceMeta& m, const std::string& name) {
    const auto it = std::find(m.quantizers.begin(), m.quantizers.end(), name);
    return it == m.quantizers.end() ? -1 : int(it - m.quantizers.begin());
}

double min_sqnr(const Series& s, std::size_t from, std::size_t to, int q) {
    double v = INFINITY;
    for (std::size_t i = from; i <= to && i < s.points.size(); ++i)
        if (q >= 0 && std::size_t(q) < s.points[i].errors.size() && !std::isnan(s.points[i].errors[std::size_t(q)].sqnr_db))
            v = std::min(v, s.points[i].errors[std::size_t(q)].sqnr_db);
    return v;
}

}  // namespace

std::optional<Fix> what_if_fix(const Context& c, const Series& s, std::size_t from, std::size_t to) {
    if (from >= s.points.size()) return std::nullopt;
    const int used = in_use(s.points[from]);
    if (used < 0) return std::nullopt;
    const std::string& run_recipe = c.meta.runs.at(std::size_t(s.run)).recipe;
    const double own = min_sqnr(s, from, to, used);
    Fix fix;
    fix.evidence.push_back({"in_use_sqnr_db", own});
    std::string best;
    double best_sqnr = -INFINITY;
    std::string best_quantizer;
    for (const char* name : kCandidates) {
        if (run_recipe == name) continue;
        const TrainingRecipe r = training_recipe(name);
        if (!r.operand(s.operand)) continue;
        const std::string qname = recipe_name(*r.operand(s.operand));
        const int q = quantizer_id(c.meta, qname);
        if (q < 0) continue;
        const double v = min_sqnr(s, from, to, q);
        if (!std::isfinite(v) && v != INFINITY) continue;
        fix.evidence.push_back({std::string(name) + "_sqnr_db", v});
        if (v > best_sqnr) best_sqnr = v, best = name, best_quantizer = qname;
    }
    const std::string span = s.points[from].step == s.points[std::min(to, s.points.size() - 1)].step
                                 ? strprintf("step %lld", (long long)s.points[from].step)
                                 : strprintf("steps %lld-%lld", (long long)s.points[from].step,
                                       (long long)s.points[std::min(to, s.points.size() - 1)].step);
    const std::string& quantizer = c.meta.quantizers.at(std::size_t(used));
    const std::string& linear = c.meta.linears.at(std::size_t(s.linear)).name;
    if (!best.empty() && best_sqnr >= own + rules::kFixMinGainDb) {
        fix.recipe = best;
        fix.summary = strprintf("train with %s: its %s keeps SQNR %.1f dB on this operand at %s where %s drops to %.1f dB",
                          best.c_str(), best_quantizer.c_str(), best_sqnr, span.c_str(), quantizer.c_str(), own);
    } else {
        fix.override = linear;
        fix.summary = best.empty()
                          ? strprintf("keep %s in high precision (--keep-high-precision '%s'): no other FP8 recipe's what-if "
                                "was recorded for this operand",
                                linear.c_str(), linear.c_str())
                          : strprintf("keep %s in high precision (--keep-high-precision '%s'): no FP8 recipe keeps this "
                                "operand at %s (best %s %.1f dB, %s %.1f dB)",
                                linear.c_str(), linear.c_str(), span.c_str(), best.c_str(), best_sqnr,
                                quantizer.c_str(), own);
    }
    return fix;
}

}  // namespace fp8scope::diagnose
