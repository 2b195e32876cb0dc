// Reading an `fp8scope-engine analyze` report back (the GUI opens one as a one-step
// trace). A damaged, foreign or newer file raises TraceError naming the file and the
// object; sizes read from the file are checked before anything is allocated.
#pragma once

#include <string>
#include <vector>

#include "analysis_report.h"
#include "trace_records.h"

namespace fp8scope {

struct AnalysisReport {
    std::string tool_version;
    std::vector<std::string> quantizers;  // the row order of every tensor's errors
    std::vector<TensorAnalysis> tensors;
};

// True when `path` is an HDF5 file whose root says format "fp8scope-analysis"; never throws.
bool is_analysis_report(const std::string& path);
AnalysisReport read_analysis_report(const std::string& path);

}  // namespace fp8scope
