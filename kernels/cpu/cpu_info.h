// What CPU the process runs on, for `devices`, `--version`, benchmarks and trace metadata:
// the model name and the vector features the kernels choose their paths from.
#pragma once

#include <string>

namespace fp8scope {

std::string cpu_model();     // "AMD EPYC 9654 96-Core Processor", or "unknown CPU"
std::string cpu_features();  // the ones the kernels use: "avx2 fma avx512f avx512bw avx512_bf16 amx"

// The vector code paths of the CPU kernels (simd.h), chosen at run time.
enum class Isa { Generic, Avx2, Avx512 };
const char* isa_name(Isa isa);  // "generic", "avx2", "avx512"
// The widest path this CPU and OS support (x86-64-v3: AVX2 FMA BMI2; x86-64-v4: AVX-512
// F BW CD DQ VL), lowered by FP8SCOPE_CPU_ISA=generic|avx2 (tests, benchmarks); read once.
Isa cpu_isa();

}  // namespace fp8scope
