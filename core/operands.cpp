#include "operands.h"

namespace fp8scope {

std::string_view gemm_name(Gemm g) {
    switch (g) {
        case Gemm::Fprop: return "fprop";
        case Gemm::Dgrad: return "dgrad";
        case Gemm::Wgrad: return "wgrad";
    }
    return "?";
}

std::string_view operand_name(Operand o) {
    switch (o) {
        case Operand::X: return "x";
        case Operand::W: return "w";
        case Operand::DY: return "dy";
    }
    return "?";
}

}  // namespace fp8scope
