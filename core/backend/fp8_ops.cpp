#include "backend/fp8_ops.h"

#include <variant>

namespace fp8scope {

GemmOperand operand_of(const Recipe& recipe) {
    GemmOperand op;
    op.mode = std::holds_alternative<MXScaling>(recipe)      ? ScalingMode::MX
              : std::holds_alternative<BlockScaling>(recipe) ? ScalingMode::Block
                                                             : ScalingMode::PerTensor;
    op.format = recipe_format(recipe);
    if (const auto* b = std::get_if<BlockScaling>(&recipe)) op.block_rows = b->block_rows, op.block_cols = b->block_cols;
    if (const auto* m = std::get_if<MXScaling>(&recipe)) op.block_rows = 1, op.block_cols = m->block;
    return op;
}

}  // namespace fp8scope
