// FP4 (E2M1) quantization on the CPU, for `analyze` and the CPU backend's FP4 casts:
// NVFP4 (1x16 blocks or 16x16 tiles, E4M3 block scales under an FP32 tensor scale) and
// MXFP4 (1x32 blocks, E8M0 scales). The rules are cast_rules.h's (numerics.md has them in
// full); this file applies them to a tensor's blocks. Edge blocks that do not fill their
// shape are blocks of their own. A block holding NaN or Inf gets the NaN scale code (E4M3
// 0x7F, E8M0 0xFF) and codes 0: every x' in it is NaN, as in an MXFP8 block (E2M1 has no
// NaN of its own).
//
// The quantizer options: rht transforms each row's full 16-blocks along the last
// dimension (cast::rht16) before the amax and the cast, and the tensor cast is the
// transformed one; a tail of cols % 16 elements stays untransformed (the map is then
// orthogonal on the full blocks and the identity on the tail, so a GEMM whose operands
// both take it along K is still unchanged). sr rounds elements stochastically with the
// bits of cast::rounding_bits(key, e), e the element's row-major index in x.
// quantize_fp4 is the reference every other FP4 cast is held to, bit for bit.
#pragma once

#include <cstdint>
#include <vector>

#include "fp8/cast_rules.h"
#include "fp8/recipe.h"
#include "fp8/scaling.h"
#include "cpu/simd.h"
#include "tensor.h"

namespace fp8scope {

// Block shape and tensor scale of an FP4 quantizer on one tensor.
struct FP4Plan {
    bool nvfp4 = true;
    MXRule rule = MXRule::RCeil;  // MXFP4
    std::int64_t block_rows = 1, block_cols = 16;
    float s_enc = 1.0f, s_dec = 1.0f;  // NVFP4's S_enc and S_dec = 1 / S_enc; MXFP4: 1
    bool rht = false, sr = false;      // the quantizer's options

    // The scale of a block from its amax bits and whether it holds NaN or Inf.
    cast::FP4BlockScale block(std::uint32_t amax_bits, bool nonfinite) const;
};

// Throws std::invalid_argument for a quantizer that is not FP4. `scaling_amax` is the
// tensor's (NaN ignored, Inf included; with rht, the transformed tensor's): it sets
// NVFP4's S_enc.
FP4Plan fp4_plan(const Recipe& r, float scaling_amax);

// cast::rht16 on each row's full 16-blocks of x (rows x cols, row-major), in place; the
// tail of cols % 16 elements stays as it is.
void rht_rows(float* x, std::int64_t rows, std::int64_t cols, int threads = 0);

// rounding_bits(key, e) for e in [e0, e0 + n): one Philox call per counter.
void rounding_bits_run(const cast::RoundingKey& key, std::uint64_t e0, std::int64_t n, std::uint32_t* out);

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

// With rht, codes and scales are those of x's transform (dequantize() gives the
// transformed x'); `key` draws sr's bits.
FP4Tensor quantize_fp4(MatrixView x, const Recipe& r, int threads = 0, const cast::RoundingKey& key = {});

// The dequantized cast into out (rows x cols, may be x.data): quantize_fp4(x, r, threads,
// key) dequantized, bit for bit, without storing codes. Returns the scaling amax of the
// tensor cast (with rht, the transformed one), scale NaN (block scales) and the overflow.
CastInfo fp4_fake_quantize(MatrixView x, const Recipe& r, float* out, const cast::RoundingKey& key = {},
                           int threads = 0);

// fp4_fake_quantize of x^T into out (cols x rows, not x.data) without a separate
// transpose: one pass transposes (and with rht transforms) x into out and takes its amax,
// a second casts out in place.
CastInfo fp4_fake_quantize_transposed(MatrixView x, const Recipe& r, float* out, const cast::RoundingKey& key = {},
                                      int threads = 0);

// The error sums of x[0, n), one row segment of one block, into acc's lanes as the FP8
// kernels sum (element i in lane i % 16). A NaN block adds its finite elements to
// nonfinite_out and nothing else. `sr`: stochastic rounding with the bits of
// rounding_bits(*sr, e0 + i) for x[i] (null: round to nearest).
void fp4_error_sums(const float* x, std::int64_t n, const cast::FP4BlockScale& b, simd::ErrorSums& acc,
                    const cast::RoundingKey* sr = nullptr, std::uint64_t e0 = 0);

}  // namespace fp8scope
