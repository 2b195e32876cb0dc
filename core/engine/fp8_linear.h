// The quantized linear layers of a model: fprop Y = X W^T, dgrad dX = dY W and wgrad
// dW = dY^T X, each operand cast by the training recipe along its GEMM's contraction
// dimension, then one GEMM of the backend (core/backend.h has the operand layout). One
// object serves all linears of a model because the delayed-scaling histories (one per
// linear x operand kind, per recipe name), the operand buffers and the capture hooks are
// shared concerns. The recipe state lives here; the arithmetic is the backend's.
// A precision plan (fp8/precision_plan.h) may give a linear's GEMMs other recipes than the
// run's: each GEMM then reads its operands as its own recipe casts them.
//
// Design choices:
// - Each operand is cast once per step into both copies its two GEMMs read: X and W in a
//   training forward (rowwise for fprop, columnwise for wgrad and dgrad, kept until
//   backward), dY in backward. Both copies use the scale in force before the cast's amax
//   is pushed into the delayed history. When the plan gives an operand's two GEMMs
//   different recipes, the copies are cast apart (rowwise-only under one, columnwise-only
//   under the other), each with the delayed history of its own recipe.
// - Smooth-SwiGLU: X' = X diag(s), W' = W diag(1/s) with power-of-two s, so X' W'^T is
//   X W^T exactly in float32; only the FP8 cast sees the smoothed channels.
// - The figures of each cast (amax, scale, overflow) reach the capture sink after the
//   step's backward (flush_reports), when a device has them ready.
// - Outlier injection (engine/injection.h) scales a copy of an operand right before its
//   cast in a training step, after smoothing: what the cast, the capture and the GEMMs see.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backend.h"
#include "engine/capture_sink.h"
#include "engine/gemm_output_check.h"
#include "engine/nonfinite_watch.h"
#include "engine/operand_injector.h"
#include "fp8/precision_plan.h"
#include "fp8/training_recipe.h"
#include "operands.h"

namespace fp8scope {

class Fp8Linear {
public:
    Fp8Linear(Backend& backend, std::vector<LinearInfo> linears);
    ~Fp8Linear();

    // Keeps histories of other recipes: one per linear x operand x recipe that casts it.
    void set_plan(PrecisionPlan plan);
    void set_recipe(const TrainingRecipe& recipe) { set_plan(PrecisionPlan(recipe)); }  // every GEMM
    const PrecisionPlan& plan() const { return plan_; }
    // Stochastic rounding's key of the casts that follow: every cast draws with {seed,
    // step, linear << 3 | operand << 1} (the backend sets bit 0 for the columnwise copy).
    // Evaluation casts draw with the key in force too: deterministic for a given step.
    // The step also says which outlier injections are in force.
    void set_rounding(std::uint64_t seed, std::uint64_t step) { seed_ = seed, step_ = step; }
    // Outlier injections, resolved for these linears (resolve_injections).
    void set_injections(const std::vector<LinearInjection>& list) { injector_.set(list, linears_.size()); }
    void set_capture(CaptureSink* sink, bool operands);
    const std::vector<LinearInfo>& linears() const { return linears_; }

    // y (N,M) = x (N,K) w^T (M,K) + b (M); b may be null; smooth (K): Smooth-SwiGLU channel
    // scales or null. `training`: push delayed histories, capture, keep the cast operands
    // for backward(). Otherwise the histories are read, never changed. An epilogue (Gelu:
    // GemmEpilogue) applies to y, in the GEMM where the backend can.
    void forward(int linear, ActPtr x, const float* w, const float* b, ActPtr y, std::int64_t N, const float* smooth,
                 bool training, const GemmEpilogue& epilogue = {});
    // After a training forward() of the same linear with the same x, w, smooth:
    // dx (N,K) = dY W, dw (M,K) = dY^T X, db (M) = column sums of dy; all overwritten,
    // db may be null. An epilogue (GeluBackward, with x the GELU's output: dx becomes the
    // gradient of its input) applies to dx; not with smooth.
    void backward(int linear, ActPtr dy, ActPtr x, const float* w, ActPtr dx, float* dw, float* db, std::int64_t N,
                  const float* smooth, const GemmEpilogue& dx_epilogue = {});
    // Hands this step's cast figures to the sink (after the backend synchronized).
    void flush_reports();

    // When the step reduces amaxes over ranks (StepSync::reduces_amaxes, set by
    // Model::set_step_sync): training casts write their amax to pending_amaxes() (linears x 3
    // floats in backend memory, indexed linear * 3 + operand; a plan that casts copies apart
    // adds as many for the columnwise-only casts) instead of pushing it into
    // their delayed history; push_pending() then pushes what is there, by then the maximum
    // over ranks, so every rank's histories and scales stay the same.
    void defer_amax_pushes(bool on);
    float* pending_amaxes() { return pending_.data(); }
    std::int64_t pending_count() const { return std::int64_t(linears_.size()) * (plan_.overridden() ? 6 : 3); }
    bool has_pending() const { return !pushes_.empty(); }
    void push_pending();
    void discard_pending() { pushes_.clear(); }  // a step given up before its pushes
    void discard_reports() { reports_.clear(); }  // ... and before its casts' figures were flushed

    // Delayed histories of every recipe used so far: versioned bytes.
    std::vector<std::uint8_t> save_state() const;
    void load_state(const std::vector<std::uint8_t>& bytes);  // throws std::runtime_error

    // The first NaN or Inf among the training casts' operands (engine/nonfinite_watch.h).
    NonFiniteWatch& nonfinite() { return watch_; }

    // The delayed state of one operand under the recipe of its rowwise copy (nullopt if not
    // delayed).
    std::optional<DelayedState> delayed_state(int linear, Operand o) const;

private:
    using Histories = std::array<std::unique_ptr<AmaxHistory>, 3>;  // indexed by Operand
    struct Cached;  // per linear: X and W as cast by the last training forward

    // How the plan casts one operand of a linear: the recipes of its rowwise and columnwise
    // copies (operand_gemms); `split` when they differ and the copies are cast apart.
    struct Uses {
        const TrainingRecipe *rowwise, *columnwise;
        bool split() const { return rowwise != columnwise; }
    };
    Uses uses(int linear, Operand o) const;
    AmaxHistory* history(int linear, Operand o, const TrainingRecipe& recipe);
    // `rowwise`/`columnwise`: the copies to cast; a columnwise-only cast (of an operand cast
    // apart) has report and pending-amax slots of its own.
    GemmOperand cast(Operand o, const TensorDesc& values, const TrainingRecipe& recipe, bool push, bool rowwise,
                     bool columnwise, OperandStorage& storage, int linear, bool report);
    std::size_t report_slot(const OperandScaling& s) const;
    // Both copies of a training cast (or the rowwise one alone), apart when the plan says.
    void cast_copies(Operand o, const TensorDesc& values, bool training, OperandStorage& storage,
                     std::unique_ptr<OperandStorage>& apart_storage, int linear, GemmOperand& rowwise,
                     GemmOperand& columnwise);
    void capture(int linear, Gemm g, Operand o, const TensorDesc& values, const std::optional<DelayedState>& state,
                 bool transposed_repeat = false);
    void watch(Operand o, const TensorDesc& values, const TrainingRecipe& recipe, int linear);
    int layer_of(int linear) const;
    TensorDesc smoothed(DeviceBuffer<float>& scratch, const TensorDesc& in, const float* smooth, bool inverse);
    // The operand as its training cast reads it: smoothed, then injected.
    TensorDesc cast_input(int linear, Operand o, DeviceBuffer<float>& scratch, const TensorDesc& in,
                          const float* smooth, bool inverse, bool training);
    std::optional<DelayedState> read(AmaxHistory* h) const;

    Backend& backend_;
    std::vector<LinearInfo> linears_;
    PrecisionPlan plan_;
    std::map<std::string, std::vector<Histories>> delayed_;  // recipe name -> per linear
    // X, W before the push (capture), as the fprop GEMM and as their other GEMM reads them
    std::vector<std::array<std::optional<DelayedState>, 4>> snapshot_;
    CaptureSink* sink_ = nullptr;
    bool capture_operands_ = false;
    GemmOutputCheck output_check_;  // capture steps: each GEMM's output error

    std::vector<std::unique_ptr<Cached>> cached_;
    std::unique_ptr<OperandStorage> dy_storage_, dy_apart_;
    DeviceBuffer<float> xs_, ws_;  // smoothed X (N,K), W (M,K)
    std::vector<OperandScaling> reports_;  // this step's casts, flushed after backward
    std::vector<CastInfo> report_slots_;   // (linears x 3) x 2 (casts apart), filled by the backend
    bool defer_ = false;
    std::uint64_t seed_ = 0, step_ = 0;  // set_rounding
    OperandInjector injector_;
    NonFiniteWatch watch_;
    DeviceBuffer<float> pending_;                                // (linears x 3) amaxes
    std::vector<std::pair<AmaxHistory*, std::size_t>> pushes_;  // history, slot in pending_
};

}  // namespace fp8scope
