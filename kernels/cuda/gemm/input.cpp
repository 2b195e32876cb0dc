// The backend's cast operands (core/backend.h GemmOperand) as inputs of the cuBLASLt GEMM
// (gemm.h), so Backend::gemm is a translation and nothing else.
#include "cuda/gemm/gemm.h"

namespace fp8scope::cuda {

GemmInput gemm_input(const GemmOperand& op, Copy copy) {
    const bool rowwise = copy == Copy::Rowwise;
    const TensorDesc& data = rowwise ? op.rowwise : op.columnwise;
    const TensorDesc& scale_inv = rowwise ? op.rowwise_scale_inv : op.columnwise_scale_inv;
    if (!data.data) throw std::invalid_argument(std::string("gemm_input: the operand has no ") +
                                                (rowwise ? "rowwise" : "columnwise") + " copy");
    GemmInput in;
    in.data = data.data;
    in.dtype = data.dtype;
    in.transposed = data.transposed;
    if (op.emulated || op.mode == ScalingMode::None) {
        // Emulated copies hold the dequantized values: an F32 GEMM reads them as they are.
        if (op.emulated) in.dtype = DType::F32;
        return in;
    }
    in.scale_inv = static_cast<const float*>(scale_inv.data);
    // A grid stored transposed is the cast's 1x128 grid in cuBLASLt's own layout (cast/quantize.h).
    in.scale_inv_gemm_ready = scale_inv.transposed;
    switch (op.mode) {
    case ScalingMode::PerTensor: in.scaling = GemmScaling::PerTensor; break;
    case ScalingMode::Block:
        // Both copies are quantized along their own last dimension with the same tiling:
        // 1x128 tiles stay 1x128, 128x128 blocks stay square.
        if (op.block_rows == 1 && op.block_cols == 128) in.scaling = GemmScaling::Tile1x128;
        else if (op.block_rows == 128 && op.block_cols == 128) in.scaling = GemmScaling::Block128;
        else
            throw GemmUnsupported("gemm_input: cuBLASLt has no " + std::to_string(op.block_rows) + "x" +
                                  std::to_string(op.block_cols) + " block scaling");
        break;
    case ScalingMode::MX: throw GemmUnsupported("gemm_input: MXFP8 has no tensor cores on Hopper (emulate it)");
    case ScalingMode::NVFP4:
    case ScalingMode::MXFP4: throw GemmUnsupported("gemm_input: FP4 has no tensor cores on Hopper (emulate it)");
    case ScalingMode::None: break;
    }
    return in;
}

}  // namespace fp8scope::cuda
