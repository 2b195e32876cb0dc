// Quantization under a recipe: `q = cast(x * s)` per element, with one scale per block
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
#include <deque>
#include <limits>
#include <vector>

#include "fp8/recipe.h"
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

// State of delayed scaling that persists across calls (one per tensor being tracked).
class DelayedState {
public:
    explicit DelayedState(const DelayedScaling& recipe) : recipe_(recipe) {}
    // Scale for the coming cast: from the history of earlier steps (s = 1 before any).
    float scale() const { return scale_; }
    // After the cast: record this step's amax and compute the next step's scale. A
    // reference amax of 0, Inf or NaN (algo max: NaN anywhere in the history) keeps the
    // previous scale; a scale past FLT_MAX clamps to FLT_MAX.
    void push(float amax);
    const std::deque<float>& history() const { return history_; }  // oldest first
    const DelayedScaling& recipe() const { return recipe_; }
    // Checkpoint restore: the history (oldest first) and scale exactly as saved.
    void restore(std::deque<float> history, float scale) {
        history_ = std::move(history);
        scale_ = scale;
    }

private:
    DelayedScaling recipe_;
    std::deque<float> history_;
    float scale_ = 1.0f;
};

// The scale rules, shared by every path that quantizes.
// Per-tensor current and blockwise: s = fp8_max / max(amax, eps); amax NaN, or an
// eps-clamped amax of 0 or Inf, gives 1; a quotient past FLT_MAX clamps to FLT_MAX; pow2
// clears the mantissa (rounds down).
float compute_scale(float amax, Format f, float eps, bool pow2);
// MX: the exponent e of X = 2^e for a block amax (finite, >= 0), clamped to [-127, 127].
// Floor: floor(log2(amax)) - emax_elem; RCeil: the least e with amax <= fp8_max * 2^e.
// An amax of 0 gives -127.
int mx_exponent(float block_amax, Format f, MXRule rule);

// NaN-ignoring, Inf-including max |x|: the amax that sets scales.
float scaling_amax(MatrixView x);

// Quantize a whole tensor. Delayed scaling needs `state` (its scale is used, then the
// tensor's amax pushed); without one it runs as a first step (s = 1). Threads over rows.
QuantizedTensor quantize(MatrixView x, const Recipe& recipe, DelayedState* state = nullptr,
                         int threads = 0);
// What a cast computed on the way, at no extra cost: the scaling amax of the tensor (the
// max of the block amaxes for block recipes), the per-tensor scale (NaN for block
// recipes) and the overflow count.
struct CastInfo {
    float amax = 0;
    float scale = std::numeric_limits<float>::quiet_NaN();
    std::int64_t overflow = 0;
};

// Quantize-dequantize in place into `out` (rows x cols): what the CPU engine feeds its
// GEMMs. Same values as quantize() followed by dequantize().
CastInfo fake_quantize(MatrixView x, const Recipe& recipe, float* out, DelayedState* state = nullptr,
                   int threads = 0);
void dequantize(const QuantizedTensor& q, float* out);

}  // namespace fp8scope
