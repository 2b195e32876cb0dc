// Rule 7: outlier injections (/meta/injections). An injection that harms a run's recipe on
// the operand it scales is the cause the user planted: named as the leading finding, at the
// first capture step at or after its start.
#include <algorithm>
#include <cmath>
#include <map>

#include "diagnose_rules.h"
#include "fp8/precision_plan.h"
#include "rules.h"

namespace fp8scope::diagnose {
namespace {

// The entries of /meta/injections: one row per index, grouped by entry.
std::map<int, std::vector<const trace::InjectionRecord*>> entries(const trace::TraceMeta& m) {
    std::map<int, std::vector<const trace::InjectionRecord*>> out;
    for (const trace::InjectionRecord& r : m.injections) out[r.entry].push_back(&r);
    return out;
}

// The linear matches the entry's block and its name pattern within the block.
bool matches(const LinearInfo& l, const trace::InjectionRecord& in) {
    if (in.layer >= 0 && l.layer != in.layer) return false;
    const std::string prefix = "blocks." + std::to_string(l.layer) + ".";
    if (l.name.rfind(prefix, 0) != 0) return false;
    return glob_match(in.linear, std::string_view(l.name).substr(prefix.size()));
}

std::string indices(const std::vector<const trace::InjectionRecord*>& rows) {
    std::string s;
    for (const auto* r : rows) s += (s.empty() ? "" : ",") + std::to_string(r->index);
    return (rows.front()->rows ? "rows " : "channels ") + s;
}

}  // namespace

void injection(const Context& c, const Series& s, SeriesRules& r) {
    if (s.run == c.baseline || s.points.empty() || in_use(s.points.back()) < 0) return;
    for (const auto& [entry, rows] : entries(c.meta)) {
        const trace::InjectionRecord& in = *rows.front();
        if (in.operand != s.operand || !matches(c.meta.linears.at(std::size_t(s.linear)), in)) continue;
        // Delayed scaling carries an outlier in its history past the injection's last step: the
        // window runs one capture interval longer, so an injection between captures is judged.
        const std::int64_t until = in.until < 0 ? INT64_MAX : in.until + std::max<std::int64_t>(1, c.meta.capture_every);
        std::size_t before = s.points.size(), first = s.points.size(), last = s.points.size();
        for (std::size_t i = 0; i < s.points.size(); ++i) {
            if (s.points[i].step < in.step) before = i;
            else if (s.points[i].step <= until) {
                if (first == s.points.size()) first = i;
                last = i;
            }
        }
        if (first == s.points.size()) continue;
        r.injection_checked.push_back(entry);
        if (before == s.points.size()) continue;  // nothing captured before it to compare with
        const trace::OperandPoint& b = s.points[before];
        const double out_before = output_sqnr(c, s.run, s.linear, s.gemm, b.step);
        // The harm at its worst capture in the injection's window.
        std::size_t worst = first;
        double worst_drop = -INFINITY, worst_over = 0, worst_under = 0, worst_out = -INFINITY;
        for (std::size_t i = first; i <= last; ++i) {
            const double drop = sqnr_of(b) - sqnr_of(s.points[i]);
            const double out_drop = out_before - output_sqnr(c, s.run, s.linear, s.gemm, s.points[i].step);
            if (drop > worst_drop) worst_drop = drop, worst = i;
            worst_over = std::max(worst_over, overflow_of(s.points[i]) - overflow_of(b));
            worst_under = std::max(worst_under, underflow_of(s.points[i]) - underflow_of(b));
            if (!std::isnan(out_drop)) worst_out = std::max(worst_out, out_drop);
        }
        const bool harmed = worst_drop >= rules::kInjectionHarmDb || worst_over >= rules::kOverflowFloorPct ||
                            worst_under >= rules::kUnderflowFloorPts ||
                            worst_out >= rules::kInjectionHarmDb;
        if (!harmed) continue;
        const trace::OperandPoint& a = s.points[first];
        Finding f;
        f.kind = "injection";
        locate(c, s, f);
        f.step = a.step;
        f.step_end = s.points[last].step;
        f.score = rules::kInjectionScore;
        const std::string& q = c.meta.quantizers.at(std::size_t(in_use(a)));
        f.summary = strprintf("injected outlier (%s x%g from step %lld) harms %s on %s: SQNR %.1f -> %.1f dB at step %lld "
                        "(worst %.1f dB at step %lld)",
                        indices(rows).c_str(), in.scale, (long long)in.step, c.meta.runs.at(std::size_t(s.run)).name.c_str(),
                        where(c, s).c_str(), sqnr_of(b), sqnr_of(a), (long long)a.step, sqnr_of(s.points[worst]),
                        (long long)s.points[worst].step);
        f.figures = {{"injection_entry", double(entry)},
                     {"injection_step", double(in.step)},
                     {"injection_scale", in.scale},
                     {"index", double(in.index)},
                     {"sqnr_before_db", sqnr_of(b)},
                     {"sqnr_db", sqnr_of(a)},
                     {"sqnr_worst_db", sqnr_of(s.points[worst])},
                     {"sqnr_drop_db", worst_drop},
                     {"overflow_before_pct", overflow_of(b)},
                     {"overflow_pct", overflow_of(a)},
                     {"underflow_before_pct", underflow_of(b)},
                     {"underflow_pct", underflow_of(a)},
                     {"amax_before", b.amax},
                     {"amax", a.amax}};
        if (!std::isnan(out_before)) {
            f.figures.push_back({"output_sqnr_before_db", out_before});
            f.figures.push_back({"output_sqnr_db", output_sqnr(c, s.run, s.linear, s.gemm, a.step)});
        }
        f.context.push_back("quantizer in use: " + q);
        f.fix = what_if_fix(c, s, first, last);
        // Keep the most harmed operand of each entry and run.
        auto it = std::find_if(r.injections.begin(), r.injections.end(),
                               [&](const auto& h) { return h.entry == entry && h.run == s.run; });
        const auto drop_of = [](const Finding& g) {
            for (const auto& [k, v] : g.figures)
                if (k == "sqnr_drop_db") return v;
            return 0.0;
        };
        if (it == r.injections.end()) r.injections.push_back({entry, s.run, std::move(f)});
        else if (drop_of(f) > drop_of(it->finding)) it->finding = std::move(f);
    }
}

void injection_findings(const Context& c, SeriesRules& r, std::vector<Finding>& out) {
    for (auto& h : r.injections) out.push_back(std::move(h.finding));
    for (const auto& [entry, rows] : entries(c.meta)) {
        const bool harmed = std::any_of(r.injections.begin(), r.injections.end(), [&](const auto& h) { return h.entry == entry; });
        if (harmed) continue;
        const trace::InjectionRecord& in = *rows.front();
        const bool seen = std::count(r.injection_checked.begin(), r.injection_checked.end(), entry) > 0;
        Finding f;
        f.kind = "injection";
        f.layer = in.layer;
        f.operand = in.operand;
        f.step = in.step;
        f.step_end = in.until;
        f.score = 10;
        f.summary = seen ? strprintf("injected outlier (%s of %s, %s x%g from step %lld) harmed no run's recipe on that operand",
                               std::string(operand_name(in.operand)).c_str(), in.linear.c_str(), indices(rows).c_str(),
                               in.scale, (long long)in.step)
                         : strprintf("injected outlier (%s of %s from step %lld) has no capture step of a quantized run to judge it by",
                               std::string(operand_name(in.operand)).c_str(), in.linear.c_str(), (long long)in.step);
        f.figures = {{"injection_entry", double(entry)}, {"injection_scale", in.scale}};
        out.push_back(std::move(f));
    }
}

}  // namespace fp8scope::diagnose
