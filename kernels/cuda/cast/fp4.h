// FP4 casts on the device (docs/numerics.md): x (R, C), BF16 or float32, to E2M1 codes
// packed two to a byte (element 2i in the low nibble, 2i + 1 in the high one; an odd row
// ends in a byte of one code), rowwise (blocks along C) and columnwise (the transpose
// (C, R), blocks along R), each with its block scale codes (NVFP4: E4M3 s_b in 1x16
// blocks, or 16x16 tiles for nvfp4_2d, under the tensor's FP32 scale; MXFP4: E8M0 2^e in
// 1x32 blocks). Codes, scale codes and overflow counts are bit-identical to the CPU's
// quantize_fp4 of x and of x^T.
//
// The quantizer's training options apply as in the training cast (fp4_train.h): rht
// transforms the columnwise copy along R (cast::rht16 on each full 16 rows of x) and casts
// it under the transformed tensor's own amax and S_dec (col_amax, col_tensor_scale_inv);
// sr rounds stochastically with rounding_bits(key, e), e the element's row-major index in
// its copy, key.tensor | 1 for the columnwise copy (nvfp4_2d without rht: the columnwise
// copy is the rowwise one transposed, bits and all).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/cast/quantize.h"
#include "fp8/cast_rules.h"
#include "fp8/recipe.h"

namespace fp8scope::cuda {

struct Fp4Target {
    std::uint8_t* row_codes = nullptr;   // R x ceil(C / 2); null: no rowwise copy
    std::uint8_t* row_scales = nullptr;  // ceil(R / block_rows) x ceil(C / block)
    std::uint8_t* col_codes = nullptr;   // C x ceil(R / 2); null: no columnwise copy
    std::uint8_t* col_scales = nullptr;  // ceil(C / block_rows) x ceil(R / block)
    // Device scalars: the scaling amax (NVFP4 computes it first; NaN ignored, Inf included),
    // S_dec (NVFP4; 1 for MXFP4) and the finite x clamped to +-6, rowwise and columnwise
    // (overwritten, not added to).
    float* amax = nullptr;
    float* tensor_scale_inv = nullptr;
    unsigned long long* overflow = nullptr;  // [2]
    // The columnwise copy's own amax and S_dec: required with rht and a columnwise copy.
    // S_dec is written whenever given (without rht: the rowwise one), the amax with rht only.
    float* col_amax = nullptr;
    float* col_tensor_scale_inv = nullptr;
};

// The packed width of a row of n codes.
FP8SCOPE_HD constexpr std::int64_t fp4_packed(std::int64_t n) { return (n + 1) / 2; }

// Block length along the contraction dimension: 16 (NVFP4) or 32 (MXFP4). Throws
// std::invalid_argument for a recipe that is not FP4.
int fp4_block(const Recipe& recipe);
// Rows of a block: 16 for nvfp4_2d's tiles, else 1.
int fp4_block_rows(const Recipe& recipe);

void cast_fp4(const CastInput& x, const Recipe& recipe, const Fp4Target& out, cudaStream_t stream,
              const cast::RoundingKey& rounding = {});

}  // namespace fp8scope::cuda
