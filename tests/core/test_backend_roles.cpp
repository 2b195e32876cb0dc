// The helpers core gives every backend: the transposed view of a descriptor and the
// operand a recipe's cast gives (mode, format, block shape), against hand-written values.
#include <gtest/gtest.h>

#include "backend.h"
#include "fp8/recipe.h"

using namespace fp8scope;

TEST(TransposedView, SwapsTheShapeOverTheSameMemory) {
    float data[6] = {};
    const TensorDesc t{data, DType::BF16, 2, 3, Device::CUDA, false};
    const TensorDesc v = transposed_view(t);
    EXPECT_EQ(v.data, static_cast<void*>(data));
    EXPECT_EQ(v.dtype, DType::BF16);
    EXPECT_EQ(v.device, Device::CUDA);
    EXPECT_EQ(v.rows, 3);
    EXPECT_EQ(v.cols, 2);
    EXPECT_TRUE(v.transposed);
    const TensorDesc back = transposed_view(v);
    EXPECT_EQ(back.rows, 2);
    EXPECT_EQ(back.cols, 3);
    EXPECT_FALSE(back.transposed);
}

TEST(OperandOf, PerTensorRecipesHaveOneScaleAndNoBlock) {
    for (const char* name : {"current_e4m3", "delayed_e5m2"}) {
        const GemmOperand op = operand_of(parse_recipe(name));
        EXPECT_EQ(op.mode, ScalingMode::PerTensor) << name;
        EXPECT_EQ(op.block_rows, 0) << name;
        EXPECT_EQ(op.block_cols, 0) << name;
        EXPECT_FALSE(op.emulated) << name;
    }
    EXPECT_EQ(operand_of(parse_recipe("current_e4m3")).format, Format::E4M3);
    EXPECT_EQ(operand_of(parse_recipe("delayed_e5m2")).format, Format::E5M2);
}

TEST(OperandOf, BlockRecipesKeepTheirBlockShape) {
    const GemmOperand tiles = operand_of(BlockScaling{Format::E4M3, 1, 128, false});
    EXPECT_EQ(tiles.mode, ScalingMode::Block);
    EXPECT_EQ(tiles.block_rows, 1);
    EXPECT_EQ(tiles.block_cols, 128);
    const GemmOperand blocks = operand_of(BlockScaling{Format::E5M2, 128, 128, true});
    EXPECT_EQ(blocks.mode, ScalingMode::Block);
    EXPECT_EQ(blocks.format, Format::E5M2);
    EXPECT_EQ(blocks.block_rows, 128);
    EXPECT_EQ(blocks.block_cols, 128);
}

TEST(OperandOf, MXIsOneRowOfItsBlock) {
    const GemmOperand op = operand_of(MXScaling{Format::E5M2, MXRule::Floor, 32});
    EXPECT_EQ(op.mode, ScalingMode::MX);
    EXPECT_EQ(op.format, Format::E5M2);
    EXPECT_EQ(op.block_rows, 1);
    EXPECT_EQ(op.block_cols, 32);
}

TEST(OperandOf, FP4QuantizersHaveTheirBlockShapes) {
    const GemmOperand nv = operand_of(parse_recipe("nvfp4:rht=1:sr=1"));
    EXPECT_EQ(nv.mode, ScalingMode::NVFP4);
    EXPECT_EQ(nv.block_rows, 1);
    EXPECT_EQ(nv.block_cols, 16);
    const GemmOperand tiles = operand_of(parse_recipe("nvfp4_2d"));
    EXPECT_EQ(tiles.mode, ScalingMode::NVFP4);
    EXPECT_EQ(tiles.block_rows, 16);
    EXPECT_EQ(tiles.block_cols, 16);
    const GemmOperand mx = operand_of(parse_recipe("mxfp4_floor"));
    EXPECT_EQ(mx.mode, ScalingMode::MXFP4);
    EXPECT_EQ(mx.block_rows, 1);
    EXPECT_EQ(mx.block_cols, 32);
}
