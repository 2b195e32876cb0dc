// The decoder: token embedding (+ learned positions, or rotary positions in attention),
// pre-norm blocks (causal attention with grouped-query heads, MLP of GELU or SwiGLU),
// final norm, output head; GPT-2 and Llama are two settings of its ModelConfig. Forward and backward are
// written by hand. Parameters and their gradients are one allocation each, tensors carved
// out of them in a fixed order (param_tensors()), so optimizers and checkpoints see flat
// arrays. Every linear layer's fprop/dgrad/wgrad GEMMs go through the training recipe;
// embeddings, head, norms, attention core and softmax stay float32.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "backend.h"
#include "engine/capture_sink.h"
#include "engine/injection.h"
#include "engine/model_config.h"
#include "fp8/precision_plan.h"
#include "fp8/training_recipe.h"
#include "operands.h"

namespace fp8scope {

class StepSync;
class NonFiniteWatch;

struct ParamTensor {
    std::string name;                // "blocks.0.attn.qkv.weight", "wte", ...
    std::size_t offset = 0;          // into params() / grads()
    std::vector<std::int64_t> shape;
    bool decay = false;              // weight decay applies (matrices, not norms/biases)
    // When backward() has finished its gradient: stage 0 the head and final norm, stage
    // 1 + (n_layer - 1 - l) block l, stage n_layer + 1 the embeddings (a tied head's too).
    int stage = 0;
    std::size_t numel() const;
};

class Model {
public:
    // Parameters, gradients and activations live in `backend`'s memory; it runs every op.
    Model(const ModelConfig& config, Backend& backend);
    ~Model();
    Model(const Model&) = delete;
    Model& operator=(const Model&) = delete;

    const ModelConfig& config() const;
    // GPT-2 initialisation (normal config.init_std, residual projections scaled by
    // 1/sqrt(2*n_layer); norm gains 1, biases 0), deterministic in `seed`.
    void init(std::uint64_t seed);
    // The same with the matrices of the blocks and an untied head drawn with std
    // `hidden_std` (the width rule's, engine/train_config.h); embeddings keep init_std.
    void init(std::uint64_t seed, float hidden_std);

    Backend& backend() const;
    std::size_t num_params() const;
    // The flat float32 parameter and gradient arrays in backend memory (host-addressable
    // only on the CPU backend; elsewhere pass them to the backend's ops).
    std::span<float> params();
    std::span<const float> params() const;
    std::span<float> grads();
    // Copies between backend memory and the host (checkpoints, snapshots, tests).
    std::vector<float> params_to_host() const;
    void params_from_host(std::span<const float> values);  // throws on a size mismatch
    std::vector<float> grads_to_host() const;
    const std::vector<ParamTensor>& param_tensors() const;
    const std::vector<LinearInfo>& linears() const;

    // Mean cross-entropy of `targets` given `tokens`, both B*T int32 in [0, vocab).
    // Keeps the activations for backward(). Delayed scaling updates its amax histories.
    float forward(const std::int32_t* tokens, const std::int32_t* targets, int B, int T);
    // After forward(): overwrites grads() with d loss / d params.
    void backward();
    // The step this model trains in (engine/step_sync.h; null: a job of one). backward()
    // tells it each time a stage's gradients are final (ParamTensor::stage), so a
    // data-parallel step can start reducing them while backward goes on; and gives this
    // rank's share of the gradient of the mean loss over the rows of all
    // sync->world_size() ranks' equal batches, so the ranks' gradients sum to it (each
    // row's gradient the bits one process with the whole batch computes). When
    // sync->reduces_amaxes(), delayed scaling's amaxes wait to be reduced over ranks
    // before they are pushed (Fp8Linear::defer_amax_pushes).
    void set_step_sync(StepSync* sync);
    // The rows of the job's whole batch the mean loss is over, when the ranks' batches
    // differ in rows (an elastic job after losing a rank); 0: world_size() equal batches.
    void set_loss_rows(int rows);
    int backward_stages() const;  // n_layer + 2

    // The deferred amaxes of the last training forward and backward (set_step_sync):
    std::span<float> pending_amaxes();  // backend memory
    bool has_pending_amaxes() const;
    void push_pending_amaxes();
    // Delayed scaling's state of one operand under the current recipe (nullopt: not delayed).
    std::optional<DelayedState> delayed_state(int linear, Operand o) const;

    // The first NaN or Inf among the training casts' operands (engine/nonfinite_watch.h).
    NonFiniteWatch& nonfinite();

    // Loss only: no activations kept for backward, amax histories untouched.
    float evaluate(const std::int32_t* tokens, const std::int32_t* targets, int B, int T);

    // Switch between steps. Delayed-scaling histories are kept per recipe name, so
    // switching away and back resumes them.
    // A plan (RecipeBook::plan) may give some linears' GEMMs other recipes.
    void set_plan(PrecisionPlan plan);
    void set_recipe(const TrainingRecipe& recipe) { set_plan(PrecisionPlan(recipe)); }
    const PrecisionPlan& plan() const;
    // The run's seed and the step to train next: they key stochastic rounding
    // (Fp8Linear::set_rounding) and say which outlier injections are in force.
    void set_rounding(std::uint64_t seed, std::uint64_t step);
    // Outlier injections (engine/injection.h) for training steps of `rows` = B*T rows;
    // throws std::invalid_argument naming the entry's field when one does not fit the model.
    void set_injections(const std::vector<Injection>& list, std::int64_t rows);

    // With a sink, every forward/backward reports op timings; with `operands` also every
    // GEMM operand (a capture step). nullptr turns capture off.
    void set_capture(CaptureSink* sink, bool operands);

    // Delayed-scaling state, for checkpoints: opaque, versioned bytes.
    std::vector<std::uint8_t> save_recipe_state() const;
    void load_recipe_state(const std::vector<std::uint8_t>& bytes);  // throws on mismatch

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace fp8scope
