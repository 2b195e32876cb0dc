// A backend's casts and GEMMs: the cast of a GEMM operand under a recipe (Transformer
// Engine's tensor: rowwise and columnwise copies with their scale grids), delayed
// scaling's state, and the GEMMs that read the copies.
//
// GEMMs have one shape: out (m,n) = A (m,k) B (n,k)^T, both operands contraction-last
// ("TN", what FP8 tensor cores need). A linear layer's three GEMMs are all of it:
//   fprop  Y  (N,M) = X (N,K)         W (M,K)^T        A = X rowwise,   B = W rowwise
//   dgrad  dX (N,K) = dY (N,M)        (W^T (K,M))^T    A = dY rowwise,  B = W columnwise
//   wgrad  dW (M,K) = dY^T (M,N)      (X^T (K,N))^T    A = dY columnwise, B = X columnwise
#pragma once

#include <cstdint>
#include <memory>

#include "backend/tensor_desc.h"
#include "fp8/cast_rules.h"
#include "fp8/recipe.h"
#include "fp8/scaling.h"

namespace fp8scope {

enum class ScalingMode : std::uint8_t {
    None,       // high precision: the GEMM's own type (float32 on the CPU, BF16 on a GPU)
    PerTensor,  // one scale (delayed or current)
    Block,      // block_rows x block_cols blocks (1x128 tiles, 128x128 blocks)
    MX,         // 1 x block with E8M0 scales
    NVFP4,      // E2M1 in 1x16 blocks (16x16 tiles) with E4M3 scales under an FP32 tensor scale
    MXFP4,      // E2M1 in 1x32 blocks with E8M0 scales
};

// A GEMM operand after the cast (Transformer Engine's tensor): the values the GEMM reads
// in a rowwise copy (rows, cols) and a columnwise copy (cols, rows) = the transpose, each
// quantized along its own last dimension, with one scale_inv per block. A copy that was
// not asked for has null data. `emulated`: the copies hold the dequantized values in
// float32 (bit-exact FP8 values times their scale_inv) instead of codes.
struct GemmOperand {
    ScalingMode mode = ScalingMode::None;
    Format format = Format::E4M3;  // of FP8 elements; E2M1 under the FP4 modes
    int block_rows = 0, block_cols = 0;  // of the rowwise copy
    TensorDesc rowwise, columnwise;
    // float32 grids, empty when None; a backend may store one transposed (the CUDA backend's
    // 1x128 grids, in the layout its GEMM reads)
    TensorDesc rowwise_scale_inv, columnwise_scale_inv;
    bool emulated = false;
    // FP4 copies a device emulates in BF16 (the CUDA backend): each copy holds
    // decode(q) * s_b, exact in BF16, and its tensor scale S_dec apart, a float32 in the
    // backend's memory (null: 1) that the GEMM multiplies in through alpha.
    const float* rowwise_tensor_scale_inv = nullptr;
    const float* columnwise_tensor_scale_inv = nullptr;
};

// The operand a cast under `recipe` gives, before its copies: mode, format and the block
// shape of the rowwise copy (0x0 for a per-tensor scale).
GemmOperand operand_of(const Recipe& recipe);

enum class Copy : std::uint8_t { Rowwise, Columnwise };

// Delayed scaling's state of one operand (its amax history and the scale of the next
// cast), kept in the backend's memory so a device can update it without the host.
class AmaxHistory {
public:
    virtual ~AmaxHistory() = default;
    virtual const DelayedScaling& recipe() const = 0;
    // The history (oldest first) and the next scale, as the host sees them (a device
    // copies them back: for checkpoints and capture steps, not every step).
    virtual DelayedState read() const = 0;
    virtual void restore(const DelayedState& state) = 0;
    // DelayedState::push of the amax at `amax` (backend memory): a data-parallel step
    // pushes the maximum over ranks of the amaxes its casts wrote to CastSpec::amax_out.
    virtual void push(const float* amax) = 0;
};

// Buffers a backend keeps for one cast operand (codes, copies, scale grids); grown on
// demand and reused from step to step.
class OperandStorage {
public:
    virtual ~OperandStorage() = default;
};

struct CastSpec {
    const Recipe* recipe = nullptr;  // null: high precision (the GEMM's own type)
    AmaxHistory* history = nullptr;  // delayed scaling: casts with its scale
    bool push = false;               // delayed scaling: then pushes this cast's amax
    bool rowwise = true, columnwise = false;
    CastInfo* report = nullptr;      // amax, scale, overflow of the rowwise cast (null: not
                                     // wanted); filled by synchronize()
    float* amax_out = nullptr;       // backend memory: receives the rowwise cast's scaling amax
    // Stochastic rounding's key (an FP4 quantizer with sr): the caller sets seed, step and
    // the tensor's id with copy bit 0; the columnwise copy draws with tensor | 1.
    cast::RoundingKey rounding;
};

// What a GEMM does with its result besides the bias; aux has the output's shape and type:
//   Gelu:         aux = A B^T + bias (the GELU's input), out = gelu(aux) (the tanh form of
//                 gelu_forward)
//   GeluBackward: out = gelu'(aux) * (A B^T), aux holding the GELU's input (no bias)
// A GPU does them in cuBLASLt's epilogue where that is faster than a pass of their own
// (GELU on the float32 result before it is rounded).
struct GemmEpilogue {
    enum class Kind : std::uint8_t { None, Gelu, GeluBackward };
    Kind kind = Kind::None;
    ActPtr aux;
};

class Fp8Ops {
public:
    virtual ~Fp8Ops() = default;

    virtual std::unique_ptr<OperandStorage> make_operand_storage() = 0;
    virtual std::unique_ptr<AmaxHistory> make_amax_history(const DelayedScaling& recipe) = 0;
    // The cast of x (rows, cols) under spec: the rowwise and/or columnwise copy the GEMMs
    // read, in `storage` (or aliasing x when no cast is needed).
    virtual GemmOperand cast(const TensorDesc& x, const CastSpec& spec, OperandStorage& storage) = 0;
    // out (m,n) = A (m,k) B (n,k)^T [+ bias (n)] [+ out when accumulate], A and B the
    // chosen copies of their operands, then the epilogue, if any.
    virtual void gemm(const GemmOperand& a, Copy ca, const GemmOperand& b, Copy cb, const TensorDesc& out,
                      const float* bias, bool accumulate, const GemmEpilogue& epi) = 0;
    // dbias (M) = sum over rows of dout (N,M).
    virtual void bias_backward(float* dbias, const TensorDesc& dout) = 0;
};

}  // namespace fp8scope
