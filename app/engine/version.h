// The version fp8scope-engine reports (--version, JSON and HDF5 reports).
#pragma once

namespace fp8scope::cli {

inline constexpr const char* kEngineVersion = "0.1.0";

}  // namespace fp8scope::cli
