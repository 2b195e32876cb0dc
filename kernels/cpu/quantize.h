// Quantization under a recipe on the CPU: `q = cast(x * s)` per element, with one scale per block
// (a whole tensor is one block). The quantized form keeps the codes and the scales so it
// can be dequantized, dumped and fed to a GEMM.
//
// Exact rules (docs/numerics.md has the full text):
// - The cast is saturating (finite values past fp8_max clamp to +-max), from the float32
//   product x * s, round-to-nearest-even.
// - Dequantized value: x' = decode(q) * scale_inv in float32, scale_inv = 1.0f / s
//   (for MX, s = 2^-e and scale_inv = 2^e exactly).
// - The amax that sets a scale ignores NaN and includes Inf (fmax semantics, as the
//   engines' amax kernels); MX blocks are the exception: NaN or Inf in a block makes its
//   E8M0 scale NaN (0xFF), its scale_inv NaN and every code the positive canonical NaN.
// - overflow counts finite x whose product x * s rounds past fp8_max (Inf x does not).
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "fp8/recipe.h"
#include "fp8/scaling.h"
#include "tensor.h"

namespace fp8scope {

struct QuantizedTensor {
    Format format = Format::E4M3;
    std::int64_t rows = 0, cols = 0;
    std::int64_t block_rows = 0, block_cols = 0;  // per-tensor: rows x cols
    std::vector<std::uint8_t> codes;              // rows x cols, row-major
    std::vector<float> scale_inv;                 // scale_rows() x scale_cols(), row-major
    std::vector<std::uint8_t> scale_e8m0;         // MX recipes only; same grid
    std::int64_t overflow = 0;                    // finite elements the saturation clamped

    std::int64_t scale_rows() const { return (rows + block_rows - 1) / block_rows; }
    std::int64_t scale_cols() const { return (cols + block_cols - 1) / block_cols; }
    float scale_inv_at(std::int64_t r, std::int64_t c) const {
        return scale_inv[(r / block_rows) * scale_cols() + c / block_cols];
    }
    float dequantize(std::int64_t r, std::int64_t c) const;
};

// NaN-ignoring, Inf-including max |x|: the amax that sets scales.
float scaling_amax(MatrixView x);

// Quantize a whole tensor. Delayed scaling needs `state` (its scale is used, then the
// tensor's amax pushed); without one it runs as a first step (s = 1). Threads over rows.
QuantizedTensor quantize(MatrixView x, const Recipe& recipe, DelayedState* state = nullptr,
                         int threads = 0);
// Quantize-dequantize in place into `out` (rows x cols): what the CPU engine feeds its
// GEMMs. Same values as quantize() followed by dequantize().
CastInfo fake_quantize(MatrixView x, const Recipe& recipe, float* out, DelayedState* state = nullptr,
                   int threads = 0);
void dequantize(const QuantizedTensor& q, float* out);

// Recipes whose blocks run along the rows (1 x B tiles, MX; B <= 128): their columnwise
// copy is a cast of its own, which fake_quantize_transposed() makes in the same pass.
bool has_cast_transpose(const Recipe& recipe);
// Both GEMM copies of x in one pass over it, tile by tile: `rowwise` (rows x cols) =
// fake_quantize(x) and `columnwise` (cols x rows) = fake_quantize(x^T), bit for bit.
// Returns the rowwise cast's figures. Throws std::invalid_argument for other recipes.
CastInfo fake_quantize_transposed(MatrixView x, const Recipe& recipe, float* rowwise, float* columnwise,
                                  int threads = 0);

}  // namespace fp8scope
