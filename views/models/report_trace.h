// An `analyze` report shown as a trace of one step: one run named by the file, one
// "linear" per analysed tensor (its name, cols x rows as in x out features), and at step
// 0 each tensor as the fprop x operand of its linear, with its statistics and the error
// under every quantizer of the report. The error, outlier and layer views then show a
// report as they show a capture step. Reports hold no block maps, scaling or timings.
#pragma once

#include <string>

#include "analysis_report_reader.h"
#include "models/series_store.h"

namespace fp8scope::views {

struct ReportTrace {
    trace::TraceMeta meta;
    TraceBatch batch;
};

ReportTrace report_as_trace(const AnalysisReport& report, const std::string& name);

}  // namespace fp8scope::views
