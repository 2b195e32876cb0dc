// FP4 casts on the device (docs/numerics.md): x (R, C), BF16 or float32, to E2M1 codes
// packed two to a byte (element 2i in the low nibble, 2i + 1 in the high one; an odd row
// ends in a byte of one code), rowwise (blocks along C) and columnwise (the transpose
// (C, R), blocks along R), each with its block scale codes (NVFP4: E4M3 s_b in 1x16
// blocks under the tensor's FP32 scale; MXFP4: E8M0 2^e in 1x32 blocks). Codes, scale
// codes and overflow counts are bit-identical to the CPU's quantize_fp4 of x and of x^T.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/cast/quantize.h"
#include "fp8/cast_rules.h"
#include "fp8/recipe.h"

namespace fp8scope::cuda {

struct Fp4Target {
    std::uint8_t* row_codes = nullptr;   // R x ceil(C / 2); null: no rowwise copy
    std::uint8_t* row_scales = nullptr;  // R x ceil(C / block)
    std::uint8_t* col_codes = nullptr;   // C x ceil(R / 2); null: no columnwise copy
    std::uint8_t* col_scales = nullptr;  // C x ceil(R / block)
    // Device scalars: the scaling amax (NVFP4 computes it first; NaN ignored, Inf included),
    // S_dec (NVFP4; 1 for MXFP4) and the finite x clamped to +-6, rowwise and columnwise
    // (overwritten, not added to).
    float* amax = nullptr;
    float* tensor_scale_inv = nullptr;
    unsigned long long* overflow = nullptr;  // [2]
};

// The packed width of a row of n codes.
FP8SCOPE_HD constexpr std::int64_t fp4_packed(std::int64_t n) { return (n + 1) / 2; }

// Block length along the contraction dimension: 16 (NVFP4) or 32 (MXFP4). Throws
// std::invalid_argument for a recipe that is not FP4, and for nvfp4_2d (16x16 tiles),
// which the device does not cast yet.
int fp4_block(const Recipe& recipe);

void cast_fp4(const CastInput& x, const Recipe& recipe, const Fp4Target& out, cudaStream_t stream);

}  // namespace fp8scope::cuda
