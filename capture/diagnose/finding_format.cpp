// JSON and text of findings.
#include "finding_format.h"

#include <cmath>
#include <cstdio>

namespace fp8scope::diagnose {
namespace {

// JSON has no NaN or Inf: they become null and the strings "inf" / "-inf".
nlohmann::json number(double v) {
    if (std::isnan(v)) return nullptr;
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    return v;
}

nlohmann::json figures(const std::vector<Figure>& v) {
    nlohmann::json j = nlohmann::json::object();
    for (const auto& [k, x] : v) j[k] = number(x);
    return j;
}

}  // namespace

std::string finding_location(const trace::TraceMeta& m, const Finding& f) {
    std::string s;
    if (f.run >= 0 && std::size_t(f.run) < m.runs.size()) s += m.runs[std::size_t(f.run)].name;
    if (f.step >= 0) s += (s.empty() ? "" : " ") + ("step " + std::to_string(f.step));
    if (f.step_end > f.step) s += "-" + std::to_string(f.step_end);
    if (f.linear >= 0 && std::size_t(f.linear) < m.linears.size()) s += " " + m.linears[std::size_t(f.linear)].name;
    else if (f.layer >= 0) s += " layer " + std::to_string(f.layer);
    if (f.gemm) s += " " + std::string(gemm_name(*f.gemm));
    if (f.operand) s += " " + std::string(operand_name(*f.operand));
    if (f.block >= 0) s += " block " + std::to_string(f.block);
    return s;
}

std::string figures_text(const std::vector<Figure>& v) {
    std::string s;
    for (const auto& [k, x] : v) {
        char buf[96];
        std::snprintf(buf, sizeof buf, "%s%s=%.4g", s.empty() ? "" : ", ", k.c_str(), x);
        s += buf;
    }
    return s;
}

nlohmann::json finding_json(const trace::TraceMeta& m, const Finding& f) {
    auto opt = [](bool has, auto v) { return has ? nlohmann::json(v) : nlohmann::json(nullptr); };
    nlohmann::json j = {
        {"kind", f.kind},
        {"severity", f.score},
        {"severity_label", severity_name(f.severity)},
        {"run", opt(f.run >= 0 && std::size_t(f.run) < m.runs.size(), f.run >= 0 && std::size_t(f.run) < m.runs.size() ? m.runs[std::size_t(f.run)].name : "")},
        {"step", opt(f.step >= 0, f.step)},
        {"step_end", opt(f.step_end >= 0, f.step_end)},
        {"layer", opt(f.layer >= 0, f.layer)},
        {"linear", opt(f.linear >= 0, f.linear >= 0 ? m.linears.at(std::size_t(f.linear)).name : "")},
        {"gemm", opt(bool(f.gemm), f.gemm ? std::string(gemm_name(*f.gemm)) : "")},
        {"operand", opt(bool(f.operand), f.operand ? std::string(operand_name(*f.operand)) : "")},
        {"block", opt(f.block >= 0, f.block)},
        {"summary", f.summary},
        {"figures", figures(f.figures)},
        {"context", f.context},
        {"fix", nullptr},
    };
    if (f.fix) {
        nlohmann::json fix = {{"summary", f.fix->summary}, {"evidence", figures(f.fix->evidence)}};
        if (!f.fix->recipe.empty()) fix["recipe"] = f.fix->recipe;
        if (!f.fix->override.empty()) fix["override"] = {{"linears", f.fix->override}, {"recipe", "baseline"}};
        j["fix"] = fix;
    }
    return j;
}

nlohmann::json findings_json(const trace::TraceReader& reader, const std::vector<Finding>& findings) {
    nlohmann::json list = nlohmann::json::array();
    for (const Finding& f : findings) list.push_back(finding_json(reader.meta(), f));
    return {{"trace", reader.path()}, {"findings", list}};
}

std::string findings_text(const trace::TraceReader& reader, const std::vector<Finding>& findings) {
    const trace::TraceMeta& m = reader.meta();
    std::string s = reader.path() + ": " + std::to_string(findings.size()) + " finding" + (findings.size() == 1 ? "" : "s") + "\n";
    int i = 0;
    for (const Finding& f : findings) {
        char head[128];
        std::snprintf(head, sizeof head, "\n%d. %-8s %3.0f  %s  ", ++i, severity_name(f.severity), f.score, f.kind.c_str());
        s += head + finding_location(m, f) + "\n   " + f.summary + "\n";
        if (!f.figures.empty()) s += "   figures: " + figures_text(f.figures) + "\n";
        for (const std::string& line : f.context) s += "   - " + line + "\n";
        if (f.fix) {
            s += "   fix: " + f.fix->summary + "\n";
            if (!f.fix->evidence.empty()) s += "   evidence: " + figures_text(f.fix->evidence) + "\n";
        }
    }
    return s;
}

}  // namespace fp8scope::diagnose
