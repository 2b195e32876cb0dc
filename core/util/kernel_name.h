// A GPU kernel's name as fp8scope shows it: demangled, without the return type and the
// parameter list ("fp8scope::cuda::cast_tile<__nv_bfloat16, 1>").
#pragma once

#include <string>

namespace fp8scope {

std::string kernel_display_name(const char* mangled);

}  // namespace fp8scope
