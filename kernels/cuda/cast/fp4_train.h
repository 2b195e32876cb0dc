// The FP4 training cast on the device: x (R, C), BF16 or float32, to the two GEMM copies
// the CUDA backend emulates FP4 GEMMs with (no FP4 tensor cores on Hopper): BF16 values
// decode(q) * s_b, exact in BF16 (E2M1 x E4M3 has at most 6 significant bits, E2M1 x 2^e
// stays in BF16's range), with each copy's tensor scale S_dec kept apart as a device
// float (NVFP4; 1 for MXFP4) for the GEMM's alpha. So x' = value * S_dec exactly as
// cast_rules.h's fp4_qdq gives it, and no rounding of S_dec enters the operands.
//
// Rowwise copy (R, C): blocks along C; columnwise copy (C, R): x^T, blocks along R, with
// rht first transformed along R (cast::rht16 on each full 16 rows; a tail stays) and cast
// under the transformed tensor's own amax and S_enc. nvfp4_2d: 16x16 tiles, the
// columnwise copy then the transpose of the rowwise one bit for bit (sr bits included)
// unless rht makes it a cast of its own. sr: cast::e2m1_code_sr with rounding_bits(key,
// e), e the element's row-major index in its copy, key.tensor | 1 for a columnwise copy
// cast of its own. The same copies as the CPU's (kernels/cpu/fp4_cast.h), in BF16. Both copies come
// from one read of x; NVFP4 reads x once before for the amax (both amaxes with rht).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/cast/quantize.h"
#include "fp8/cast_rules.h"
#include "fp8/recipe.h"

namespace fp8scope::cuda {

// The device scalars of one training cast besides CastStats.
struct Fp4Scalars {
    float row_tensor_scale_inv;  // S_dec of the rowwise copy (MXFP4: 1)
    float col_tensor_scale_inv;  // S_dec of the columnwise copy (without rht: the rowwise one)
    float col_amax;              // rht: the transformed tensor's scaling amax
    float unused;
};

struct Fp4Copies {
    std::uint16_t* rowwise = nullptr;     // (R, C) BF16 bits; null: no rowwise copy
    std::uint16_t* columnwise = nullptr;  // (C, R) BF16 bits; null: no columnwise copy
    // Required. stats: amax = the scaling amax of x (NaN ignored, Inf included), scale =
    // NaN (block scales, as the CPU reports them), overflow = the finite elements each copy
    // clamped to +-6 (overwritten).
    CastStats* stats = nullptr;
    Fp4Scalars* scalars = nullptr;
};

// Throws std::invalid_argument for a recipe that is not FP4 or an input not F32 / BF16.
void cast_fp4_copies(const CastInput& x, const Recipe& recipe, const cast::RoundingKey& rounding,
                     const Fp4Copies& out, cudaStream_t stream);

}  // namespace fp8scope::cuda
