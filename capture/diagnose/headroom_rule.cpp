// Rule 4: delayed scaling's headroom fp8_max / (amax * scale) over every step (the per-step
// scaling table, not only capture steps): where it fell below 1 the step saturated, and
// with amax still growing, how many steps are left before it does.
#include <algorithm>
#include <cmath>
#include <deque>

#include "diagnose_rules.h"
#include "fp8/recipe.h"
#include "fp8/training_recipe.h"
#include "rules.h"

namespace fp8scope::diagnose {
namespace {

// The quantizer of each operand tensor of a run: the precision plan's, else the recipe's.
std::string quantizer_of(const trace::TraceMeta& m, const std::vector<trace::GemmPrecision>& plan, int run, int linear,
                         Gemm g, Operand o) {
    if (!plan.empty()) {
        const trace::GemmPrecision& p = plan[std::size_t(linear) * 3 + std::size_t(g)];
        const bool a = g == Gemm::Fprop ? o == Operand::X : o == Operand::DY;  // A: fprop x, dgrad and wgrad dy
        return a ? p.a : p.b;
    }
    try {
        const TrainingRecipe r = training_recipe(m.runs.at(std::size_t(run)).recipe);
        return r.operand(o) ? recipe_name(*r.operand(o)) : "";
    } catch (const std::exception&) {
        return "";  // a custom recipe of a trace without a plan
    }
}

struct SlotState {
    int linear = 0;
    Gemm gemm = Gemm::Fprop;
    Operand operand = Operand::X;
    double fp8_max = 448;
    std::deque<std::pair<double, double>> recent;  // (step, log amax)
    double min_h = INFINITY, last_h = NAN;
    std::int64_t min_step = -1, last_step = -1, first_over = -1, over_steps = 0;
};

// Least-squares slope of log amax over the recent steps: the growth per step.
double growth(const std::deque<std::pair<double, double>>& v) {
    if (v.size() < 3) return 1;
    double sx = 0, sy = 0, sxx = 0, sxy = 0;
    for (const auto& [x, y] : v) sx += x, sy += y, sxx += x * x, sxy += x * y;
    const double n = double(v.size()), den = n * sxx - sx * sx;
    return den > 0 ? std::exp((n * sxy - sx * sy) / den) : 1;
}

constexpr std::int64_t kStepsPerRead = 1024;  // scaling rows read at a time: memory stays flat

}  // namespace

void headroom(const Context& c, std::vector<Finding>& out) {
    for (int run = 0; run < int(c.meta.runs.size()); ++run) {
        if (run == c.baseline) continue;
        const std::vector<trace::GemmPrecision> plan = trace::run_precision(c.meta, run);
        std::vector<SlotState> slots(c.meta.linears.size() * trace::kOperandsPerLinear);
        std::vector<int> used;  // slot ids of delayed operands, each tensor once
        for (int l = 0; l < int(c.meta.linears.size()); ++l)
            for (Operand o : {Operand::X, Operand::W, Operand::DY}) {
                const Gemm g = o == Operand::DY ? Gemm::Dgrad : Gemm::Fprop;  // the first GEMM reading it
                const std::string q = quantizer_of(c.meta, plan, run, l, g, o);
                if (q.rfind("delayed", 0) != 0) continue;
                const int slot = trace::operand_slot(l, g, o);
                SlotState& s = slots[std::size_t(slot)];
                s.linear = l, s.gemm = g, s.operand = o;
                s.fp8_max = q.find("e5m2") != std::string::npos ? fp8_max(Format::E5M2) : fp8_max(Format::E4M3);
                used.push_back(slot);
            }
        if (used.empty()) continue;
        const std::vector<std::int64_t> steps = c.reader.row_steps(run, INT64_MIN, INT64_MAX);
        for (std::size_t i = 0; i < steps.size(); i += std::size_t(kStepsPerRead)) {
            const std::size_t j = std::min(steps.size(), i + std::size_t(kStepsPerRead)) - 1;
            for (const trace::ScalingRecord& rec : c.reader.scaling(run, steps[i], steps[j]))
                for (int slot : used) {
                    SlotState& s = slots[std::size_t(slot)];
                    const double amax = rec.amax[std::size_t(slot)], scale = rec.scale[std::size_t(slot)];
                    if (!(amax > 0) || !std::isfinite(amax) || !(scale > 0) || !std::isfinite(scale)) continue;
                    const double h = s.fp8_max / (amax * scale);
                    s.recent.push_back({double(rec.step), std::log(amax)});
                    if (int(s.recent.size()) > rules::kGrowthWindow) s.recent.pop_front();
                    s.last_h = h, s.last_step = rec.step;
                    if (rec.step <= c.settle_end) continue;
                    if (h < s.min_h) s.min_h = h, s.min_step = rec.step;
                    if (h < 1) {
                        ++s.over_steps;
                        if (s.first_over < 0) s.first_over = rec.step;
                    }
                }
        }
        for (int slot : used) {
            const SlotState& s = slots[std::size_t(slot)];
            if (s.last_step < 0) continue;
            const double g = growth(s.recent);
            const bool growing = g >= rules::kMinGrowthPerStep;
            const double left = !growing ? INFINITY : s.last_h <= 1 ? 0 : std::log(s.last_h) / std::log(g);
            double over_score = s.over_steps ? score_from(1 / s.min_h, 2.0, 16.0) : 0;
            if (s.over_steps <= rules::kTransientCaptures && over_score < rules::kCriticalScore)
                over_score = std::min(over_score, rules::kWarningScore - 1);  // one step, caught by the next scale
            const double forecast =
                left <= rules::kForecastCriticalSteps ? rules::kCriticalScore
                : left <= rules::kForecastWarnSteps
                    ? rules::kWarningScore + (rules::kCriticalScore - rules::kWarningScore) *
                                                 (rules::kForecastWarnSteps - left) /
                                                 (rules::kForecastWarnSteps - rules::kForecastCriticalSteps)
                    : 0;
            const double forecast_score = g >= rules::kFastGrowthPerStep ? forecast : std::min(forecast, 20.0);
            if (!s.over_steps && forecast == 0) continue;
            Series where_s;
            where_s.run = run, where_s.linear = s.linear, where_s.gemm = s.gemm, where_s.operand = s.operand;
            Finding f;
            f.kind = "headroom";
            locate(c, where_s, f);
            f.score = std::max(over_score, forecast_score);
            f.step = s.over_steps ? s.first_over : s.last_step;
            f.step_end = s.last_step;
            f.figures = {{"min_headroom", s.min_h},       {"min_headroom_step", double(s.min_step)},
                         {"overflow_steps", double(s.over_steps)}, {"headroom", s.last_h},
                         {"amax_growth_per_step", g},      {"forecast_steps", left}};
            std::string text = strprintf("delayed scaling's headroom fp8_max / (amax * scale) on %s", where(c, where_s).c_str());
            if (s.over_steps)
                text += strprintf(" fell to %.3g at step %lld (%lld steps below 1, i.e. saturated, from step %lld)", s.min_h,
                            (long long)s.min_step, (long long)s.over_steps, (long long)s.first_over);
            if (forecast_score > 0)
                text += left == 0 ? strprintf("; amax grows x%.3f a step past the scale: overflowing now", g)
                                  : strprintf("; %.3g left at step %lld with amax growing x%.3f a step: overflow in ~%.0f steps",
                                        s.last_h, (long long)s.last_step, g, left);
            f.summary = text;
            if (forecast_score > 0 || over_score >= rules::kWarningScore) {
                Fix fix;
                fix.recipe = "current";
                fix.summary = "per-tensor current scaling (current) or blockwise/mxfp8 scale each step from that step's own "
                              "amax: no history to lag behind a growing amax";
                fix.evidence = {{"headroom", s.last_h}, {"amax_growth_per_step", g}};
                f.fix = fix;
            }
            out.push_back(std::move(f));
        }
    }
}

}  // namespace fp8scope::diagnose
