#include "backend/fp8_ops.h"

#include <variant>

namespace fp8scope {

GemmOperand operand_of(const Recipe& recipe) {
    GemmOperand op;
    if (const auto* nv = std::get_if<NVFP4Scaling>(&recipe)) {
        op.mode = ScalingMode::NVFP4;
        op.block_rows = nv->two_d ? 16 : 1;
        op.block_cols = 16;
        return op;
    }
    if (std::holds_alternative<MXFP4Scaling>(recipe)) {
        op.mode = ScalingMode::MXFP4;
        op.block_rows = 1;
        op.block_cols = 32;
        return op;
    }
    op.mode = std::holds_alternative<MXScaling>(recipe)      ? ScalingMode::MX
              : std::holds_alternative<BlockScaling>(recipe) ? ScalingMode::Block
                                                             : ScalingMode::PerTensor;
    op.format = recipe_format(recipe);
    if (const auto* b = std::get_if<BlockScaling>(&recipe)) op.block_rows = b->block_rows, op.block_cols = b->block_cols;
    if (const auto* m = std::get_if<MXScaling>(&recipe)) op.block_rows = 1, op.block_cols = m->block;
    return op;
}

}  // namespace fp8scope
