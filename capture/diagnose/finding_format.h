// Findings as the engine CLI prints them: JSON (README's "Diagnosing a trace" schema) and a
// readable list, most important first.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "finding.h"

namespace fp8scope::diagnose {

nlohmann::json finding_json(const trace::TraceMeta& meta, const Finding& f);
// Where a finding lies: "delayed step 21-39 blocks.1.mlp.fc2 fprop x".
std::string finding_location(const trace::TraceMeta& meta, const Finding& f);
// "sqnr_db=24, overflow_pct=1.5".
std::string figures_text(const std::vector<Figure>& figures);
// {"trace": path, "findings": [...]}
nlohmann::json findings_json(const trace::TraceReader& reader, const std::vector<Finding>& findings);
// One block per finding: "1. critical (100) injection  delayed step 21-39 blocks.1.mlp.fc2 fprop x", its
// summary, figures, context and fix.
std::string findings_text(const trace::TraceReader& reader, const std::vector<Finding>& findings);

}  // namespace fp8scope::diagnose
