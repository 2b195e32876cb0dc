// The JSON report of `analyze --json`: one document with every tensor's statistics, the
// error of every quantizer and the files that failed. Non-finite numbers become null.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis_report.h"

namespace fp8scope::cli {

// A file (or one tensor of it) that could not be analyzed.
struct FileError {
    std::string file;
    std::string error;
};

nlohmann::ordered_json analysis_json(const std::vector<std::string>& quantizers,
                                     const std::vector<TensorAnalysis>& tensors,
                                     const std::vector<FileError>& errors);

}  // namespace fp8scope::cli
