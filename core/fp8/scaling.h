// The scale rules of the recipes, shared by every backend that quantizes (FP8.md):
// per-tensor current and blockwise scales, MX exponents, and delayed scaling's amax
// history. The rules themselves are in cast_rules.h, which the CPU and the CUDA kernels
// both compile, so FP8 codes agree across devices; these are their out-of-line forms.
#pragma once

#include <cstdint>
#include <deque>
#include <limits>
#include <optional>

#include "fp8/recipe.h"

namespace fp8scope {

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

// What a cast computed on the way, at no extra cost: the scaling amax of the tensor (the
// max of the block amaxes for block recipes), the per-tensor scale (NaN for block
// recipes) and the overflow count.
struct CastInfo {
    float amax = 0;
    float scale = std::numeric_limits<float>::quiet_NaN();
    std::int64_t overflow = 0;
};

// True when quantizing the transpose gives the transpose of the rowwise result: no
// quantization, per-tensor scales, square blocks. 1x128 tiles and MX blocks run along
// one axis, so their columnwise copy is a cast of its own.
bool columnwise_is_transpose(const Recipe& r);
inline bool columnwise_is_transpose(const std::optional<Recipe>& r) { return !r || columnwise_is_transpose(*r); }

}  // namespace fp8scope
