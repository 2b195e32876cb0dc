// The rules over a whole run: its loss gap to the baseline (rule 1), non-finite losses,
// and the rewinds with what preceded them (rule 6).
#include <algorithm>
#include <cmath>

#include "diagnose_rules.h"
#include "rules.h"
#include "run_seeds.h"
#include "stats/seed_comparison.h"

namespace fp8scope::diagnose {

void loss_gap(Context& c, std::vector<Finding>& out) {
    const std::size_t runs = c.meta.runs.size();
    c.onset.assign(runs, -1);
    if (c.baseline < 0) return;
    std::vector<stats::RunLosses> losses(runs);
    for (std::size_t r = 0; r < runs; ++r)
        for (const trace::StepRecord& s : c.reader.steps(int(r))) {
            losses[r].step.push_back(double(s.step));
            losses[r].loss.push_back(s.loss);
            losses[r].eval.push_back(s.eval_loss);
        }
    const std::optional<trace::SeedGaps> seeded = trace::seed_gaps(c.meta, losses);
    const int per = seeded ? seeded->comparison.seeds : 1;
    const stats::SeedComparison cmp =
        seeded ? seeded->comparison : stats::compare_seeds(losses, 1, c.baseline);
    const char* series = stats::gap_series_name(cmp.series);
    // Every recipe's final gap, the evidence a loss-gap fix quotes.
    std::vector<Figure> gaps;
    std::string best;
    double best_abs = INFINITY, best_pct = NAN;
    for (std::size_t g = 0; g < cmp.gap.size(); ++g) {
        if (int(g) == cmp.baseline || cmp.gap[g].at.empty()) continue;
        const std::string name = seeded ? seeded->recipes[g] : c.meta.runs[g].name;
        const double pct = cmp.gap[g].final().percent();
        gaps.push_back({name + "_gap_pct", pct});
        if (std::abs(pct) < best_abs) best_abs = std::abs(pct), best_pct = pct, best = name;
    }
    for (std::size_t g = 0; g < cmp.gap.size(); ++g) {
        if (int(g) == cmp.baseline || cmp.gap[g].at.empty()) continue;
        const stats::GapCurve& curve = cmp.gap[g];
        const stats::PairedDifference d = curve.final();
        const std::string name = seeded ? seeded->recipes[g] : c.meta.runs[g].name;
        Finding f;
        f.kind = "loss_gap";
        f.run = int(g) * per;
        f.step_end = std::int64_t(curve.step.back());
        f.figures = {{"gap", d.mean}, {"gap_pct", d.percent()}, {"baseline_loss", d.baseline_mean}, {"seeds", double(d.n)}};
        if (seeded) {
            const std::optional<double> first = curve.first_outside();
            f.step = first ? std::int64_t(*first) : f.step_end;
            f.figures.push_back({"ci_low", d.lo()});
            f.figures.push_back({"ci_high", d.hi()});
            if (first) {
                f.figures.push_back({"onset_step", *first});
                for (int s = 0; s < per; ++s) c.onset[std::size_t(int(g) * per + s)] = std::int64_t(*first);
            }
            const bool worse = d.significant() && d.mean > 0;
            f.score = worse ? (std::abs(d.percent()) >= rules::kCriticalGapPct ? 80 : 55) : d.significant() ? 30 : 15;
            f.summary = strprintf("%s: %s gap to the baseline %+.4g (%+.3f%%), 95%% CI [%+.4g, %+.4g] over %d seeds: %s%s",
                            name.c_str(), series, d.mean, d.percent(), d.lo(), d.hi(), d.n,
                            d.significant() ? "significant" : "within the seeds' noise",
                            first ? strprintf(", outside the noise band from step %lld", (long long)*first).c_str() : "");
        } else {
            f.step = f.step_end;
            f.score = std::abs(d.percent()) >= rules::kUnseededWarnGapPct && d.mean > 0 ? 50 : 25;
            f.summary = strprintf("%s: %s gap to the baseline %+.4g (%+.3f%%) at step %lld; one seed, so whether it is "
                            "real is unknown (train --seeds N)",
                            name.c_str(), series, d.mean, d.percent(), (long long)f.step_end);
        }
        f.context.push_back(strprintf("series: %s", series));
        if (!best.empty() && best != name && d.mean > 0) {
            Fix fix;
            fix.recipe = best;
            fix.summary = strprintf("%s stays closest to the baseline in this trace (%+.3f%%)", best.c_str(), best_pct);
            fix.evidence = gaps;
            f.fix = fix;
        }
        out.push_back(std::move(f));
    }
}

void non_finite_losses(const Context& c, std::vector<Finding>& out) {
    for (std::size_t r = 0; r < c.meta.runs.size(); ++r) {
        const auto steps = c.reader.steps(int(r));
        // A run without one finite loss recorded none (a trace imported from statistics
        // logs); an engine run whose every loss is NaN has its non_finite event, below.
        if (std::none_of(steps.begin(), steps.end(), [](const auto& s) { return std::isfinite(s.loss); })) continue;
        for (const trace::StepRecord& s : steps)
            if (!std::isfinite(s.loss)) {
                Finding f;
                f.kind = "non_finite";
                f.run = int(r);
                f.step = f.step_end = s.step;
                f.score = rules::kNonFiniteScore;
                f.summary = strprintf("%s: the loss is %g at step %lld, the run's first non-finite loss",
                                c.meta.runs[r].name.c_str(), s.loss, (long long)s.step);
                f.figures = {{"loss", s.loss}};
                out.push_back(std::move(f));
                break;
            }
    }
    for (const trace::EventRecord& e : c.reader.events())
        if (e.kind == EventKind::NonFinite) {
            Finding f;
            f.kind = "non_finite";
            f.run = e.run;
            f.step = f.step_end = e.step;
            f.score = rules::kNonFiniteScore;
            f.summary = strprintf("non-finite event at step %lld: %s", (long long)e.step, e.detail.c_str());
            out.push_back(std::move(f));
        }
}

void rewinds(const Context& c, std::vector<Finding>& out) {
    const std::int64_t every = std::max<std::int64_t>(1, c.meta.capture_every);
    const std::int64_t look = c.options.rewind_lookback >= 0 ? c.options.rewind_lookback : rules::kRewindLookbackCaptures * every;
    const std::vector<Finding> before = out;
    const std::vector<trace::EventRecord> events = c.reader.events();
    for (const trace::EventRecord& e : events) {
        if (e.kind != EventKind::Rewind) continue;
        Finding f;
        f.kind = "rewind";
        f.run = e.run;
        f.step = f.step_end = e.step;
        f.score = 50;
        for (const trace::EventRecord& p : events)
            if (p.step >= e.step - look && p.step <= e.step && &p != &e && p.kind != EventKind::Rewind &&
                p.kind != EventKind::Start && p.kind != EventKind::Checkpoint)
                f.context.push_back(strprintf("event %s at step %lld %s", event_kind_name(p.kind), (long long)p.step, p.detail.c_str()));
        int preceded = 0;
        double worst = 0;
        for (const Finding& g : before) {
            const std::int64_t end = g.step_end >= 0 ? g.step_end : g.step;
            if (g.step < 0 || end < e.step - look || g.step > e.step || (e.run >= 0 && g.run >= 0 && g.run != e.run)) continue;
            if (g.kind == "loss_gap") continue;
            f.context.push_back(strprintf("%s %s: %s", severity_name(g.severity), g.kind.c_str(), g.summary.c_str()));
            ++preceded;
            worst = std::max(worst, g.score);
        }
        f.figures = {{"lookback_steps", double(look)}, {"findings_before", double(preceded)}, {"worst_score_before", worst}};
        f.summary = strprintf("rewind at step %lld (%s)%s", (long long)e.step, e.detail.c_str(),
                        preceded ? strprintf(", preceded by %d finding%s in the %lld steps before", preceded,
                                       preceded > 1 ? "s" : "", (long long)look).c_str()
                                 : strprintf(", no finding in the %lld steps before", (long long)look).c_str());
        out.push_back(std::move(f));
    }
}

}  // namespace fp8scope::diagnose
