// The quantized linear layers of a model: fprop Y = X W^T, dgrad dX = dY W and wgrad
// dW = dY^T X, each operand quantized along its GEMM's contraction dimension by the
// training recipe (bit-exact FP8 values from fake_quantize), then a float32 sgemm on the
// dequantized values. One object serves all linears of a model because the delayed
// scaling histories (one per linear x operand kind, per recipe name), the scratch buffers
// and the capture hooks are shared concerns.
//
// Design choices:
// - Operand orientation. A per-tensor scale, or square 128x128 blocks, quantize the
//   transpose to exactly the transposed values, so those "columnwise" copies reuse the
//   rowwise ones through the GEMM's transpose flags (no second cast). 1x128 tiles and
//   MX blocks run along one axis, so their columnwise copy is cast from the transposed
//   tensor itself.
// - Delayed scaling pushes X and W amaxes in forward and dY's in backward; the other
//   orientation of the same tensor reuses the scale that was in force for the first cast.
// - Smooth-SwiGLU: X' = X diag(s), W' = W diag(1/s) with power-of-two s, so X' W'^T is
//   X W^T exactly in float32; only the FP8 cast sees the smoothed channels.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "engine/capture_sink.h"
#include "engine/model.h"
#include "fp8/training_recipe.h"
#include "cpu/quantize.h"

namespace fp8scope {

class Fp8Linear {
public:
    explicit Fp8Linear(std::vector<LinearInfo> linears);

    void set_recipe(const TrainingRecipe& recipe);  // keeps histories of other recipes
    const TrainingRecipe& recipe() const { return recipe_; }
    void set_capture(CaptureSink* sink, bool operands);
    const std::vector<LinearInfo>& linears() const { return linears_; }

    // y (N,M) = x (N,K) w^T (M,K) + b (M); b may be null; smooth (K): Smooth-SwiGLU channel
    // scales or null. `training`: push delayed histories, capture, keep the quantized
    // operands for backward(). Otherwise the histories are read, never changed.
    void forward(int linear, const float* x, const float* w, const float* b, float* y, std::int64_t N,
                 const float* smooth, bool training);
    // After a training forward() of the same linear with the same x, w, smooth:
    // dx (N,K) = dY W, dw (M,K) = dY^T X, db (M) = column sums of dy; all overwritten,
    // db may be null.
    void backward(int linear, const float* dy, const float* x, const float* w, float* dx, float* dw,
                  float* db, std::int64_t N, const float* smooth);

    // Delayed histories of every recipe used so far: versioned bytes.
    std::vector<std::uint8_t> save_state() const;
    void load_state(const std::vector<std::uint8_t>& bytes);  // throws std::runtime_error

    // The delayed state of one operand under the current recipe (null if not delayed).
    const DelayedState* delayed_state(int linear, Operand o) const;

private:
    using States = std::array<std::optional<DelayedState>, 3>;  // indexed by Operand

    DelayedState* live_state(int linear, Operand o);
    // `report`: a training cast whose amax and scale go to the sink (once per operand).
    const float* cast(Operand o, const float* values, std::int64_t rows, std::int64_t cols, float* out,
                      DelayedState* state, int linear, bool report);
    void capture(int linear, Gemm g, Operand o, const float* values, std::int64_t rows, std::int64_t cols,
                 const DelayedState* state, bool transposed_repeat = false);
    void timing(const char* op, int linear, std::int64_t start_ns) const;
    const float* smoothed_x(const float* x, const float* smooth, std::int64_t N, std::int64_t K);
    const float* smoothed_w(const float* w, const float* smooth, std::int64_t M, std::int64_t K);
    float* xq(int linear, std::int64_t N);
    float* wq(int linear);

    std::vector<LinearInfo> linears_;
    TrainingRecipe recipe_;
    std::map<std::string, std::vector<States>> delayed_;  // recipe name -> per linear
    std::vector<States> snapshot_;  // per linear: X/W/dY states as they were before this step's push
    CaptureSink* sink_ = nullptr;
    bool capture_operands_ = false;

    // Quantized operands kept from forward for backward (only for quantized operands).
    std::vector<float> xq_cache_;  // per linear (N, K), N of the last training forward
    std::int64_t xq_rows_ = 0;
    std::vector<float> wq_cache_;  // per linear (M, K)
    std::vector<std::size_t> x_offset_, w_offset_;
    // Scratch, grown to the largest linear.
    std::vector<float> xs_, ws_;          // smoothed X (N,K), W (M,K)
    std::vector<float> dyq_, dyt_, dytq_;  // dY (N,M) cast; dY^T (M,N) raw and cast
    std::vector<float> xt_, xtq_;         // X^T (K,N) raw and cast
    std::vector<float> wt_, wtq_;         // W^T (K,M) raw and cast
};

// True when quantizing the transpose gives the transpose of the rowwise result: no
// quantization, per-tensor scales, square blocks.
bool columnwise_is_transpose(const std::optional<Recipe>& r);

}  // namespace fp8scope
