// Fallback names of GEMMs and operands, compiled only while core/ does not define them
// (see views/CMakeLists.txt). The names are the ones training_recipe.h documents.
#include "engine/training_recipe.h"

namespace fp8scope {

std::string_view gemm_name(Gemm g) {
    return g == Gemm::Fprop ? "fprop" : g == Gemm::Dgrad ? "dgrad" : "wgrad";
}

std::string_view operand_name(Operand o) {
    return o == Operand::X ? "x" : o == Operand::W ? "w" : "dy";
}

}  // namespace fp8scope
