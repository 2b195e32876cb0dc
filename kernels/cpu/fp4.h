// FP4 (E2M1) quantization on the CPU, for `analyze`: NVFP4 (1x16 blocks or 16x16 tiles,
// E4M3 block scales under an FP32 tensor scale) and MXFP4 (1x32 blocks, E8M0 scales).
// The rules are cast_rules.h's (numerics.md has them in full); this file applies them to
// a tensor's blocks. Edge blocks that do not fill their shape are blocks of their own.
// A block holding NaN or Inf gets the NaN scale code (E4M3 0x7F, E8M0 0xFF) and codes 0:
// every x' in it is NaN, as in an MXFP8 block (E2M1 has no NaN of its own).
#pragma once

#include <cstdint>
#include <vector>

#include "fp8/cast_rules.h"
#include "fp8/recipe.h"
#include "cpu/simd.h"
#include "tensor.h"

namespace fp8scope {

// Block shape and tensor scale of an FP4 quantizer on one tensor.
struct FP4Plan {
    bool nvfp4 = true;
    MXRule rule = MXRule::RCeil;  // MXFP4
    std::int64_t block_rows = 1, block_cols = 16;
    float s_enc = 1.0f, s_dec = 1.0f;  // NVFP4's S_enc and S_dec = 1 / S_enc; MXFP4: 1

    // The scale of a block from its amax bits and whether it holds NaN or Inf.
    cast::FP4BlockScale block(std::uint32_t amax_bits, bool nonfinite) const;
};

// Throws std::invalid_argument for a quantizer that is not FP4. `scaling_amax` is the
// tensor's (NaN ignored, Inf included): it sets NVFP4's S_enc.
FP4Plan fp4_plan(const Recipe& r, float scaling_amax);

struct FP4Tensor {
    bool nvfp4 = true;
    std::int64_t rows = 0, cols = 0, block_rows = 1, block_cols = 16;
    std::vector<std::uint8_t> codes;        // rows x cols: one E2M1 code per element
    std::vector<std::uint8_t> scale_codes;  // scale_rows() x scale_cols(): E4M3 (NVFP4) or E8M0 (MXFP4)
    float tensor_scale_inv = 1.0f;          // NVFP4: S_dec; MXFP4: 1
    std::int64_t overflow = 0;              // finite elements clamped to +-6 after scaling

    std::int64_t scale_rows() const { return (rows + block_rows - 1) / block_rows; }
    std::int64_t scale_cols() const { return (cols + block_cols - 1) / block_cols; }
    // x' from the stored codes alone: (decode(q) * scale) * tensor_scale_inv; NaN in a
    // block whose scale code is NaN.
    float dequantize(std::int64_t r, std::int64_t c) const;
};

FP4Tensor quantize_fp4(MatrixView x, const Recipe& r, int threads = 0);

// The error sums of x[0, n), one row segment of one block, into acc's lanes as the FP8
// kernels sum (element i in lane i % 16). A NaN block adds its finite elements to
// nonfinite_out and nothing else.
void fp4_error_sums(const float* x, std::int64_t n, const cast::FP4BlockScale& b, simd::ErrorSums& acc);

}  // namespace fp8scope
