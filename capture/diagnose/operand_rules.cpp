// The rules over one operand's capture steps: error drift (rule 2), bursts of overflow or
// underflow (rule 3), delayed scaling's first steps on scale 1 (rule 4), activation
// kurtosis (rule 5) and non-finite amaxes.
#include <algorithm>
#include <cmath>

#include "diagnose_rules.h"
#include "rules.h"

namespace fp8scope::diagnose {
namespace {

using rules::kReferenceCaptures;

// The first point past settling, and the end of the window a rule looks at (inclusive).
std::size_t first_settled(const Context& c, const Series& s) {
    std::size_t i = 0;
    while (i < s.points.size() && s.points[i].step <= c.settle_end) ++i;
    return i;
}

double cap_in_settling(const Context& c, std::int64_t step, double score) {
    return step <= c.settle_end ? std::min(score, rules::kWarningScore - 1) : score;
}

}  // namespace

void drift(const Context& c, const Series& s, SeriesRules& r) {
    const std::size_t from = first_settled(c, s);
    std::size_t end = s.points.size();  // one past the window
    const std::int64_t onset = c.onset.empty() ? -1 : c.onset[std::size_t(s.run)];
    if (onset >= 0)
        while (end > from && s.points[end - 1].step > onset) --end;
    if (end < from + kReferenceCaptures + 1 || in_use(s.points[from]) < 0) return;
    std::vector<double> ref_sqnr, ref_over, ref_under, ref_out;
    for (std::size_t i = from; i < from + kReferenceCaptures; ++i) {
        ref_sqnr.push_back(sqnr_of(s.points[i]));
        ref_over.push_back(overflow_of(s.points[i]));
        ref_under.push_back(underflow_of(s.points[i]));
        ref_out.push_back(output_sqnr(c, s.run, s.linear, s.gemm, s.points[i].step));
    }
    const double ref = median(ref_sqnr);
    std::size_t worst = end, first = end;
    for (std::size_t i = from + kReferenceCaptures; i < end; ++i) {
        const double drop = ref - sqnr_of(s.points[i]);
        if (drop >= rules::kDriftWarnDb && first == end) first = i;
        if (drop >= rules::kDriftWarnDb && (worst == end || sqnr_of(s.points[i]) < sqnr_of(s.points[worst]))) worst = i;
    }
    if (worst == end) return;
    const trace::OperandPoint& p = s.points[worst];
    const double drop = ref - sqnr_of(p);
    Finding f;
    f.kind = "operand_drift";
    locate(c, s, f);
    f.step = s.points[first].step;
    f.step_end = p.step;
    f.score = score_from(drop, rules::kDriftWarnDb, rules::kDriftCriticalDb);
    int below = 0;  // captures past the warning drop
    for (std::size_t i = first; i < end; ++i) below += ref - sqnr_of(s.points[i]) >= rules::kDriftWarnDb;
    const bool recovered = worst + 1 < s.points.size() && ref - sqnr_of(s.points[worst + 1]) < rules::kDriftWarnDb;
    if (below <= rules::kTransientCaptures && recovered && f.score < rules::kCriticalScore) {
        f.score = std::min(f.score, rules::kWarningScore - 1);
        f.context.push_back(strprintf("transient: back within %.0f dB of the reference at step %lld", rules::kDriftWarnDb,
                                (long long)s.points[worst + 1].step));
    }
    const double out_ref = median(ref_out), out_now = output_sqnr(c, s.run, s.linear, s.gemm, p.step);
    f.summary = strprintf("%s under %s: SQNR fell %.1f dB (%.1f -> %.1f dB) from step %lld%s", where(c, s).c_str(),
                    c.meta.quantizers.at(std::size_t(in_use(p))).c_str(), drop, ref, sqnr_of(p),
                    (long long)f.step, onset >= 0 ? strprintf(", before the loss gap's onset at step %lld", (long long)onset).c_str() : "");
    f.figures = {{"sqnr_reference_db", ref},
                 {"sqnr_db", sqnr_of(p)},
                 {"sqnr_drop_db", drop},
                 {"overflow_reference_pct", median(ref_over)},
                 {"overflow_pct", overflow_of(p)},
                 {"underflow_reference_pct", median(ref_under)},
                 {"underflow_pct", underflow_of(p)},
                 {"amax", p.amax}};
    if (!std::isnan(out_now)) {
        f.figures.push_back({"output_sqnr_reference_db", out_ref});
        f.figures.push_back({"output_sqnr_db", out_now});
    }
    f.fix = what_if_fix(c, s, first, worst);
    r.drift.push_back(std::move(f));
}

void bursts(const Context& c, const Series& s, std::vector<Finding>& out) {
    struct Kind {
        const char* name;
        double (*value)(const trace::OperandPoint&);
        bool points;  // judged by points added (underflow) rather than by a factor
        double floor, warn, critical;
    };
    const Kind kinds[] = {
        {"overflow", overflow_of, false, rules::kOverflowFloorPct, rules::kOverflowWarnPct, rules::kOverflowCriticalPct},
        {"underflow", underflow_of, true, rules::kUnderflowFloorPts, rules::kUnderflowWarnPts, rules::kUnderflowCriticalPts},
    };
    for (const Kind& k : kinds) {
        std::vector<double> history;
        std::size_t start = 0, peak = 0;
        double level = NAN, peak_excess = 0;
        bool open = false;
        auto close = [&](std::size_t last) {
            const trace::OperandPoint& p = s.points[peak];
            Finding f;
            f.kind = std::string(k.name) + "_burst";
            locate(c, s, f);
            f.step = s.points[start].step;
            f.step_end = s.points[last].step;
            f.score = cap_in_settling(c, f.step, score_from(peak_excess, k.warn, k.critical));
            f.summary = strprintf("%s burst on %s under %s: %.4g%% at step %lld against %.4g%% before (steps %lld-%lld)%s",
                            k.name, where(c, s).c_str(), c.meta.quantizers.at(std::size_t(in_use(p))).c_str(),
                            k.value(p), (long long)p.step, level, (long long)f.step, (long long)f.step_end,
                            f.step <= c.settle_end ? ", while training settles" : "");
            f.figures = {{std::string(k.name) + "_pct", k.value(p)},
                         {std::string(k.name) + "_before_pct", level},
                         {"peak_step", double(p.step)},
                         {"captures", double(last - start + 1)},
                         {"sqnr_db", sqnr_of(p)},
                         {"amax", p.amax}};
            f.fix = what_if_fix(c, s, start, last);
            // What the burst cost: the best FP8 what-if's SQNR over the one in use.
            double cost = 0;
            if (f.fix)
                for (const auto& [name, v] : f.fix->evidence)
                    if (name != "in_use_sqnr_db" && std::isfinite(v)) cost = std::max(cost, v - f.fix->evidence[0].second);
            f.figures.push_back({"sqnr_cost_db", cost});
            const bool transient = last - start + 1 <= std::size_t(rules::kTransientCaptures) && last + 1 < s.points.size();
            if (cost < rules::kFixMinGainDb) {
                f.score = std::min(f.score, rules::kWarningScore - 1);
                f.fix.reset();
                f.context.push_back(strprintf("costs %.1f dB of SQNR against the best FP8 what-if: harmless", cost));
            } else if (transient && f.score < rules::kCriticalScore) {
                f.score = std::min(f.score, rules::kWarningScore - 1);
                f.context.push_back("transient: one capture, gone at the next");
            }
            out.push_back(std::move(f));
            open = false;
        };
        for (std::size_t i = 0; i < s.points.size(); ++i) {
            const double v = k.value(s.points[i]);
            if (std::isnan(v)) continue;
            const double m = median(history);
            const bool burst = int(history.size()) >= rules::kBurstMinHistory &&
                               (k.points ? v - m >= k.floor : v >= k.floor && v >= rules::kBurstFactor * m);
            if (burst) {
                const double excess = k.points ? v - m : v;
                if (!open) start = i, peak = i, level = m, peak_excess = excess, open = true;
                if (excess > peak_excess) peak = i, peak_excess = excess;
                continue;  // a burst does not enter the history it is judged against
            }
            if (open) close(i - 1);
            history.push_back(v);
        }
        if (open) close(s.points.size() - 1);
    }
}

void scale_one(const Context& c, const Series& s, SeriesRules& r) {
    if (s.points.empty() || in_use(s.points[0]) < 0) return;
    const std::string& q = c.meta.quantizers.at(std::size_t(in_use(s.points[0])));
    if (q.rfind("delayed", 0) != 0) return;
    std::size_t n = 0;
    while (n < s.points.size() && s.points[n].scale == 1.0) ++n;
    if (n == 0 || n == s.points.size()) return;
    std::vector<double> later;
    for (std::size_t i = n; i < s.points.size(); ++i) later.push_back(sqnr_of(s.points[i]));
    std::size_t worst = 0;
    for (std::size_t i = 1; i < n; ++i)
        if (sqnr_of(s.points[i]) < sqnr_of(s.points[worst])) worst = i;
    Finding f;
    f.kind = "delayed_scale_one";
    locate(c, s, f);
    f.step = s.points[0].step;
    f.step_end = s.points[n - 1].step;
    f.score = 20;  // expected of delayed scaling; info
    const double settled = median(later);
    f.figures = {{"sqnr_db", sqnr_of(s.points[worst])},
                 {"sqnr_later_db", settled},
                 {"underflow_pct", underflow_of(s.points[worst])},
                 {"overflow_pct", overflow_of(s.points[worst])},
                 {"amax", s.points[worst].amax}};
    f.summary = strprintf("delayed scaling ran its first captured steps on scale 1 (no amax history yet): %s at SQNR "
                    "%.1f dB at step %lld, %.1f dB once scaled",
                    where(c, s).c_str(), sqnr_of(s.points[worst]), (long long)s.points[worst].step, settled);
    r.scale_one.push_back(std::move(f));
}

void kurtosis(const Context& c, const Series& s, std::vector<Finding>& out) {
    // x's statistics are one tensor's, the same for fprop and wgrad: judged once.
    if (s.operand != Operand::X || s.gemm != Gemm::Fprop) return;
    const std::size_t from = first_settled(c, s);
    if (s.points.size() < from + kReferenceCaptures + 1) return;
    std::vector<double> ref_v;
    for (std::size_t i = from; i < from + kReferenceCaptures; ++i) ref_v.push_back(s.points[i].kurtosis);
    const double ref = median(ref_v);
    std::size_t worst = from + kReferenceCaptures;
    for (std::size_t i = worst; i < s.points.size(); ++i)
        if (s.points[i].kurtosis > s.points[worst].kurtosis) worst = i;
    const double k = s.points[worst].kurtosis, growth = k / ref;
    if (!(ref > 0) || !(growth >= rules::kKurtosisGrowthWarn && k >= rules::kKurtosisMinWarn)) return;
    std::size_t first = from + kReferenceCaptures;
    while (first < worst && !(s.points[first].kurtosis >= rules::kKurtosisGrowthWarn * ref)) ++first;
    Finding f;
    f.kind = "kurtosis_growth";
    locate(c, s, f);
    f.gemm.reset();  // the activation itself, whatever GEMM reads it
    f.step = s.points[first].step;
    f.step_end = s.points[worst].step;
    const bool critical = growth >= rules::kKurtosisGrowthCritical && k >= rules::kKurtosisMinCritical;
    f.score = critical ? rules::kCriticalScore + std::min(20.0, std::log2(growth / rules::kKurtosisGrowthCritical))
                       : rules::kWarningScore + 10 * std::min(2.9, std::log2(growth / rules::kKurtosisGrowthWarn));
    f.summary = strprintf("activation x of %s: kurtosis rose %.1fx (%.1f -> %.1f) by step %lld, an outlier feature forming "
                    "(reported to precede FP8 divergence)",
                    c.meta.linears.at(std::size_t(s.linear)).name.c_str(), growth, ref, k, (long long)f.step_end);
    f.figures = {{"kurtosis_reference", ref}, {"kurtosis", k}, {"growth", growth}, {"amax", s.points[worst].amax},
                 {"sqnr_db", sqnr_of(s.points[worst])}};
    f.fix = what_if_fix(c, s, first, worst);
    out.push_back(std::move(f));
}

void non_finite_amax(const Context& c, const Series& s, std::vector<Finding>& out) {
    for (const trace::OperandPoint& p : s.points) {
        const int q = in_use(p);
        const double amax = q >= 0 ? p.errors[std::size_t(q)].amax : p.amax;  // the scaling amax counts Inf
        // Amaxes ignore NaN (docs/numerics.md): a NaN one was not computed (a trace imported
        // from statistics logs that lack it); an Inf one reached the cast.
        if (!std::isinf(amax) && !std::isinf(p.amax)) continue;
        Finding f;
        f.kind = "non_finite";
        locate(c, s, f);
        f.step = f.step_end = p.step;
        f.score = rules::kNonFiniteScore - 1;  // after a non-finite loss of the same step
        f.summary = strprintf("%s has a non-finite amax (%g) at step %lld: NaN or Inf reached the cast", where(c, s).c_str(),
                        amax, (long long)p.step);
        f.figures = {{"amax", amax}};
        out.push_back(std::move(f));
        return;  // the first one
    }
}

}  // namespace fp8scope::diagnose
