// diagnose(): reads what the rules need, one run's operand series at a time (never the
// whole trace), runs every rule and ranks the findings.
#include <algorithm>
#include <map>
#include <tuple>

#include <nlohmann/json.hpp>

#include "diagnose_rules.h"
#include "rules.h"

namespace fp8scope::diagnose {
namespace {

// The end of settling: kSettleWarmups times the config's LR warmup.
std::int64_t settle_end(const trace::TraceMeta& m) {
    std::int64_t warmup = rules::kSettleDefaultWarmup;
    try {
        const nlohmann::json cfg = nlohmann::json::parse(m.config_json);
        if (cfg.contains("schedule") && cfg["schedule"].contains("warmup_steps"))
            warmup = cfg["schedule"]["warmup_steps"].get<std::int64_t>();
    } catch (const std::exception&) {
        // A config that does not parse keeps the default.
    }
    return std::int64_t(rules::kSettleWarmups * double(warmup));
}

// x's copies of fprop and wgrad (w: fprop, dgrad; dy: dgrad, wgrad) are one tensor: a finding
// of the same kind on both at the same steps is kept once, on the GEMM with the higher score.
void merge_gemms(std::vector<Finding>& v) {
    std::map<std::tuple<std::string, int, int, int, std::int64_t>, std::size_t> seen;
    std::vector<Finding> out;
    for (Finding& f : v) {
        if (!f.operand || !f.gemm) {
            out.push_back(std::move(f));
            continue;
        }
        const auto key = std::make_tuple(f.kind, f.run, f.linear, int(*f.operand), f.step);
        auto [it, fresh] = seen.try_emplace(key, out.size());
        if (fresh) {
            out.push_back(std::move(f));
            continue;
        }
        Finding& kept = out[it->second];
        const std::string other = std::string(gemm_name(f.score > kept.score ? *kept.gemm : *f.gemm));
        if (f.score > kept.score) kept = std::move(f);
        kept.context.push_back("also on the " + other + " GEMM's copy of this operand");
    }
    v = std::move(out);
}

}  // namespace

const char* severity_name(Severity s) {
    return s == Severity::Critical ? "critical" : s == Severity::Warning ? "warning" : "info";
}

Severity severity_of(double score) {
    return score >= rules::kCriticalScore ? Severity::Critical
           : score >= rules::kWarningScore ? Severity::Warning
                                            : Severity::Info;
}

std::vector<Finding> diagnose(const trace::TraceReader& reader, const Options& options) {
    const trace::TraceMeta& m = reader.meta();
    Context c{reader, m, options, -1, 0, {}, {}};
    c.baseline = trace::baseline_of(m);
    c.settle_end = settle_end(m);
    for (int run = 0; run < int(m.runs.size()); ++run) c.gemm_errors.push_back(reader.gemm_errors(run));

    std::vector<Finding> out;
    loss_gap(c, out);
    non_finite_losses(c, out);
    headroom(c, out);
    gate_up_alignment(c, out);
    SeriesRules per;
    std::vector<Finding> bursts_found;
    for (int run = 0; run < int(m.runs.size()); ++run) {
        std::vector<std::vector<trace::OperandPoint>> series = reader.run_operand_series(run);
        for (int l = 0; l < int(m.linears.size()); ++l)
            for (Gemm g : {Gemm::Fprop, Gemm::Dgrad, Gemm::Wgrad})
                for (Operand o : {Operand::X, Operand::W, Operand::DY}) {
                    const int slot = trace::operand_slot(l, g, o);
                    if (slot < 0) continue;
                    Series s{run, l, g, o, std::move(series[std::size_t(slot)])};
                    if (s.points.empty()) continue;
                    non_finite_amax(c, s, out);
                    if (run == c.baseline) continue;
                    drift(c, s, per);
                    bursts(c, s, bursts_found);
                    scale_one(c, s, per);
                    kurtosis(c, s, out);
                    injection(c, s, per);
                }
    }
    // Rule 2: the largest drops of each run.
    std::stable_sort(per.drift.begin(), per.drift.end(), [](const Finding& a, const Finding& b) { return a.score > b.score; });
    merge_gemms(per.drift);
    std::map<int, int> kept;
    for (Finding& f : per.drift)
        if (kept[f.run]++ < rules::kDriftTopOperands) out.push_back(std::move(f));
    // Rule 4's first steps on scale 1: one finding per run, its worst operand.
    std::map<int, Finding> first;
    for (Finding& f : per.scale_one) {
        auto it = first.find(f.run);
        if (it == first.end() || f.figures[0].second < it->second.figures[0].second) first[f.run] = std::move(f);
    }
    for (auto& [run, f] : first) out.push_back(std::move(f));
    merge_gemms(bursts_found);
    for (Finding& f : bursts_found) out.push_back(std::move(f));
    injection_findings(c, per, out);
    attribution(c, out);

    for (Finding& f : out) f.severity = severity_of(f.score);
    rewinds(c, out);
    for (Finding& f : out) f.severity = severity_of(f.score);
    std::stable_sort(out.begin(), out.end(), [](const Finding& a, const Finding& b) {
        return a.score != b.score ? a.score > b.score : a.step < b.step;
    });
    if (options.max_per_kind > 0) {
        std::map<std::string, int> n;
        out.erase(std::remove_if(out.begin(), out.end(), [&](const Finding& f) { return n[f.kind]++ >= options.max_per_kind; }),
                  out.end());
    }
    return out;
}

}  // namespace fp8scope::diagnose
