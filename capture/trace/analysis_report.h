// The HDF5 report of `fp8scope-engine analyze`: tensor statistics and the quantization
// error of every quantizer, one group per tensor. Layout (format "fp8scope-analysis", v2):
//   /                     attrs format, format_version, tool_version, quantizers (names)
//   /tensors/<index>      attrs file, name, dtype (strings), shape (int64[rank])
//     stats               compound scalar: counts, amax, moments, dynamic range, outliers
//     histogram           int64[277], bin i = count(floor(log2|x|) == min_exponent + i);
//                         attrs min_exponent, zero, nan, inf
//     channel_absmax      float32[cols]
//     top                 compound {value f32, row i64, col i64}[k], largest |x| first
//     errors              compound, one row per quantizer: quantizer (string) + ErrorStats
// Non-finite figures (sqnr_db of an exact quantization) are stored as they are.
// Version 1 named the quantizers recipes (the root attribute and the errors' first column);
// the reader reads both.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fp8/analysis.h"

namespace fp8scope {

// One analyzed tensor and where it came from.
struct TensorAnalysis {
    std::string file;
    std::string name;
    std::string dtype;  // what the file stored it as
    std::vector<std::int64_t> shape;
    Analysis analysis;
};

inline constexpr const char* kAnalysisFormat = "fp8scope-analysis";
inline constexpr int kAnalysisFormatVersion = 2;

// Writes the report to `path` through a temporary file renamed at the end, so a failure
// leaves no partial file. Throws std::runtime_error naming the path and the object.
void write_analysis_report(const std::string& path, const std::string& tool_version,
                           const std::vector<std::string>& quantizers,
                           const std::vector<TensorAnalysis>& tensors);

}  // namespace fp8scope
