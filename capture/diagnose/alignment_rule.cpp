// Rule 8: a SwiGLU MLP's gate and up rows aligning (Fishman et al. 2024), from the trace's
// gate/up alignment table: the channel that drives it, what it does to fc2's input, and
// the fix, Smooth-SwiGLU or fc2 kept in high precision, with the trace's own figures.
#include <algorithm>
#include <cmath>
#include <map>

#include <nlohmann/json.hpp>

#include "diagnose_rules.h"
#include "rules.h"

namespace fp8scope::diagnose {
namespace {

// The config's model.smooth_swiglu; false when absent or unreadable.
bool smooth_swiglu_on(const trace::TraceMeta& m) {
    try {
        const nlohmann::json cfg = nlohmann::json::parse(m.config_json);
        return cfg.contains("model") && cfg["model"].value("smooth_swiglu", false);
    } catch (const std::exception&) {
        return false;
    }
}

// The fc2 of an fc1 ("blocks.3.mlp.fc1" -> "blocks.3.mlp.fc2"); -1 when none.
int fc2_of(const trace::TraceMeta& m, int fc1) {
    std::string name = m.linears.at(std::size_t(fc1)).name;
    name.back() = '2';
    for (std::size_t i = 0; i < m.linears.size(); ++i)
        if (m.linears[i].name == name) return int(i);
    return -1;
}

// fc2's input under the quantizer in use at a step: its SQNR, and that quantizer's name.
std::pair<double, std::string> down_input_sqnr(const Context& c, int run, int fc2, std::int64_t step) {
    if (fc2 < 0) return {NAN, ""};
    const auto rec = c.reader.operand({run, step, fc2, Gemm::Fprop, Operand::X});
    if (!rec || rec->quantizer_in_use < 0 || std::size_t(rec->quantizer_in_use) >= rec->errors.size()) return {NAN, ""};
    return {rec->errors[std::size_t(rec->quantizer_in_use)].sqnr_db, c.meta.quantizers.at(std::size_t(rec->quantizer_in_use))};
}

}  // namespace

void gate_up_alignment(const Context& c, std::vector<Finding>& out) {
    const bool smooth = smooth_swiglu_on(c.meta);
    for (int run = 0; run < int(c.meta.runs.size()); ++run) {
        if (run == c.baseline) continue;  // alignment harms the FP8 casts, which a baseline has none of
        std::map<int, std::map<std::int64_t, trace::GateUpAlignmentRecord>> by_linear;  // a rewound step: the later row
        for (const auto& a : c.reader.gate_up_alignment(run)) by_linear[a.linear][a.step] = a;
        for (const auto& [linear, rows] : by_linear) {
            std::vector<trace::GateUpAlignmentRecord> s;
            for (const auto& [step, a] : rows) s.push_back(a);
            if (s.size() < std::size_t(rules::kReferenceCaptures) + 1) continue;
            std::vector<double> ref_v;
            for (int i = 0; i < rules::kReferenceCaptures; ++i) ref_v.push_back(s[std::size_t(i)].max_abs_cos);
            const double ref = median(ref_v);
            std::size_t worst = std::size_t(rules::kReferenceCaptures);
            for (std::size_t i = worst; i < s.size(); ++i)
                if (s[i].max_abs_cos > s[worst].max_abs_cos) worst = i;
            const trace::GateUpAlignmentRecord& w = s[worst];
            const double growth = w.max_abs_cos / ref;
            if (!(ref > 0) || !(w.max_abs_cos >= rules::kAlignmentWarnCos && growth >= rules::kAlignmentGrowth)) continue;
            std::size_t first = std::size_t(rules::kReferenceCaptures);
            while (first < worst && !(s[first].max_abs_cos >= rules::kAlignmentWarnCos &&
                                      s[first].max_abs_cos >= rules::kAlignmentGrowth * ref))
                ++first;

            Finding f;
            f.kind = "gate_up_alignment";
            f.run = run;
            f.linear = linear;
            f.layer = c.meta.linears.at(std::size_t(linear)).layer;
            f.step = s[first].step;
            f.step_end = w.step;
            f.score = score_from(w.max_abs_cos, rules::kAlignmentWarnCos, rules::kAlignmentCriticalCos);
            const double ratio = w.top_down_amax / w.down_amax_median;
            const std::string& name = c.meta.linears.at(std::size_t(linear)).name;
            f.summary = strprintf("gate/up alignment growing in %s: max |cos| of a channel's gate and up rows %.2f -> %.2f "
                                  "(%.1fx) by step %lld, %lld of %lld channels above %.1f; channel %lld leads (cos %+.2f, "
                                  "||gate|| ||up|| %.3g)",
                                  name.c_str(), ref, w.max_abs_cos, growth, (long long)w.step, (long long)w.aligned,
                                  (long long)w.channels, stats::kAlignedCos, (long long)w.top_channel, w.top_cos,
                                  w.top_norm_product);
            if (std::isfinite(ratio))
                f.summary += strprintf(", its amax in fc2's input %.3g is %.1fx the median channel's", w.top_down_amax, ratio);
            f.figures = {{"max_abs_cos_reference", ref},
                         {"max_abs_cos", w.max_abs_cos},
                         {"growth", growth},
                         {"p99_abs_cos", w.p99_abs_cos},
                         {"mean_abs_cos", w.mean_abs_cos},
                         {"aligned_channels", double(w.aligned)},
                         {"channel", double(w.top_channel)},
                         {"channel_cos", w.top_cos},
                         {"channel_norm_product", w.top_norm_product},
                         {"down_channel_amax", w.top_down_amax},
                         {"down_amax_median", w.down_amax_median},
                         {"down_amax_ratio", ratio}};
            f.context.push_back("Fishman et al. 2024: aligned gate and up rows make silu(w1.x) (w3.x) grow like the "
                                "square of the input, outliers in the down projection's input that FP8 cannot hold");

            const int fc2 = fc2_of(c.meta, linear);
            const auto [sqnr, quantizer] = down_input_sqnr(c, run, fc2, w.step);
            Fix fix;
            fix.evidence = {{"down_channel_amax", w.top_down_amax}, {"down_amax_median", w.down_amax_median},
                            {"down_amax_ratio", ratio}, {"down_input_sqnr_db", sqnr}};
            const std::string down = fc2 >= 0 ? c.meta.linears[std::size_t(fc2)].name : name;
            const std::string figures =
                std::isfinite(sqnr) ? strprintf("; at step %lld fc2's input has SQNR %.1f dB under %s", (long long)w.step,
                                                sqnr, quantizer.c_str())
                                    : std::string();
            if (!smooth) {
                fix.summary = strprintf("train with Smooth-SwiGLU (--set model.smooth_swiglu=true): it scales each channel "
                                        "of fc2's input by its own amax before the cast, so channel %lld (%.1fx the median "
                                        "channel's amax) no longer sets the scale of the others%s",
                                        (long long)w.top_channel, ratio, figures.c_str());
            } else {
                fix.override = down;
                fix.summary = strprintf("Smooth-SwiGLU is on and the rows still align: keep %s in high precision "
                                        "(--keep-high-precision '%s'), its input in BF16%s",
                                        down.c_str(), down.c_str(), figures.c_str());
            }
            f.fix = std::move(fix);
            out.push_back(std::move(f));
        }
    }
}

}  // namespace fp8scope::diagnose
