// Model internals shared by model.cpp (forward/backward) and model_layout.cpp (where each
// tensor lives in the parameter and activation allocations). Not part of the API.
//
// Shape letters, used in every comment below:
//   B batch, T time (sequence), C channels (d_model), V vocabulary, L layers,
//   NH heads, KV key/value heads, hs head size (C / NH), QKV = (NH + 2 KV) hs the qkv
//   width ([q | k | v]), H MLP hidden width, H1 fc1 output width (H for GELU, 2*H for
//   SwiGLU: [gate | up]), maxT position embeddings.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "engine/fp8_linear.h"
#include "engine/model.h"

namespace fp8scope {

// Per-layer tensors are stacked over L, llm.c style. Absent ones (biases when the config
// has none, LayerNorm biases under RMSNorm, wpe under RoPE) are null.
struct ParameterTensors {
    float* wte;    // (V, C)
    float* wpe;    // (maxT, C)
    float* ln1w;   // (L, C)
    float* ln1b;   // (L, C)
    float* qkvw;   // (L, QKV, C)
    float* qkvb;   // (L, QKV)
    float* projw;  // (L, C, C)
    float* projb;  // (L, C)
    float* ln2w;   // (L, C)
    float* ln2b;   // (L, C)
    float* fc1w;   // (L, H1, C)
    float* fc1b;   // (L, H1)
    float* fc2w;   // (L, C, H)
    float* fc2b;   // (L, C)
    float* lnfw;   // (C)
    float* lnfb;   // (C)
    float* head;   // (V, C) output head; wte itself when the config ties them
};

// Forward activations kept for backward, then the activation gradients of one layer
// (reused by every layer on the way back), in the backend's activation dtype. Norm
// statistics, losses and Smooth-SwiGLU scales are float32 on every backend; norm means
// are null under RMSNorm.
struct ActivationTensors {
    ActPtr encoded;    // (B, T, C)
    ActPtr ln1;        // (L, B, T, C)
    float* ln1_mean;   // (L, B, T)
    float* ln1_rstd;   // (L, B, T)
    ActPtr qkv;        // (L, B, T, QKV), q and k rotated under RoPE
    ActPtr atty;       // (L, B, T, C)
    ActPtr att;        // (L, attention_saved(B, T, NH)) what attention backward needs
    ActPtr residual2;  // (L, B, T, C)
    ActPtr ln2;        // (L, B, T, C)
    float* ln2_mean;   // (L, B, T)
    float* ln2_rstd;   // (L, B, T)
    ActPtr fch;        // (L, B, T, H1) fc1 output
    ActPtr fch_act;    // (L, B, T, H) GELU/SwiGLU output, fc2 input
    float* smooth;     // (L, H) Smooth-SwiGLU channel scales
    ActPtr residual3;  // (L, B, T, C)
    ActPtr lnf;        // (B, T, C)
    float* lnf_mean;   // (B, T)
    float* lnf_rstd;   // (B, T)
    ActPtr logits;     // (B, T, V) probabilities after forward, dlogits during backward
    float* losses;     // (B, T)
    ActPtr proj_out;   // (B, T, C) attn.proj / mlp.fc2 output before the residual add
    ActPtr dresidual;  // (B, T, C)
    ActPtr dln;        // (B, T, C)
    ActPtr dqkv;       // (B, T, QKV)
    ActPtr datty;      // (B, T, C)
    ActPtr dfch;       // (B, T, H1)
    ActPtr dfch_act;   // (B, T, H)
};

// Linear layers of block l are l*kLinearsPerBlock + these.
constexpr int kLinearsPerBlock = 4;
enum BlockLinear : int { kQkv = 0, kProj = 1, kFc1 = 2, kFc2 = 3 };

// Carves the parameter tensors out of `base` (null: only counts); returns the float count
// and, when `tensors` is given, lists them with names, shapes and offsets.
std::size_t carve_params(const ModelConfig& c, float* base, ParameterTensors& p,
                         std::vector<ParamTensor>* tensors);
// Same for the activations of a (B, T) step: elements of the activation dtype from `base`
// and float32 statistics from `stats`; `att_saved` is the backend's attention_saved(B,T,NH).
struct ActivationSizes {
    std::size_t acts = 0, stats = 0;
};
ActivationSizes carve_activations(const ModelConfig& c, int B, int T, std::int64_t att_saved, ActPtr base,
                                  float* stats, ActivationTensors& a);
std::vector<LinearInfo> model_linears(const ModelConfig& c);

struct Model::Impl {
    Backend& backend;
    ModelConfig config;
    std::size_t n_params = 0;
    DeviceBuffer<float> params, grads, stats;  // one allocation each, in backend memory
    DeviceBuffer<std::byte> acts;
    DeviceBuffer<float> rope;                // RoPE's (maxT, hs/2) [cos, sin] pairs (pos = rope)
    ParameterTensors p{}, dp{};              // dp: the same layout over grads
    ActivationTensors a{};
    std::vector<ParamTensor> tensors;
    Fp8Linear linear;
    int B = 0, T = 0;                        // shape the activations are carved for
    DeviceBuffer<std::int32_t> tokens, targets;  // (B, T) of the last forward
    std::vector<bool> smoothed;              // per layer: fc2 ran with Smooth-SwiGLU scales
    bool have_forward = false;
    CaptureSink* sink = nullptr;
    bool capture_operands = false;
    StepSync* sync = nullptr;                // Model::set_step_sync
    int loss_ranks = 1;                      // sync's world size
    int loss_rows = 0;                       // Model::set_loss_rows (0: B x loss_ranks)

    Impl(const ModelConfig& c, Backend& backend);
    void ensure_activations(int B, int T);
    float run_forward(const std::int32_t* tokens, const std::int32_t* targets, int B, int T, bool training);
    void run_backward(Model& self);  // self: the model StepSync::grads_ready names
};

}  // namespace fp8scope
