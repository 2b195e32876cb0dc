// The human-readable report of `analyze`: per tensor a header with its statistics and a
// table with one row per quantizer.
#pragma once

#include <cstdio>

#include "analysis_report.h"

namespace fp8scope::cli {

void print_tensor_text(std::FILE* out, const TensorAnalysis& t);

}  // namespace fp8scope::cli
