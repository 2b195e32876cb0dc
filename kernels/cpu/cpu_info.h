// What CPU the process runs on, for `devices`, `--version`, benchmarks and trace metadata:
// the model name and the vector features the kernels choose their paths from.
#pragma once

#include <string>

namespace fp8scope {

std::string cpu_model();     // "AMD EPYC 9654 96-Core Processor", or "unknown CPU"
std::string cpu_features();  // the ones the kernels use: "avx2 fma avx512f avx512bw avx512_bf16 amx"

}  // namespace fp8scope
