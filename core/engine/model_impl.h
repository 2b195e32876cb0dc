// Model internals shared by model.cpp (forward/backward) and model_layout.cpp (where each
// tensor lives in the parameter and activation allocations). Not part of the API.
//
// Shape letters, used in every comment below:
//   B batch, T time (sequence), C channels (d_model), V vocabulary, L layers,
//   NH heads, H MLP hidden width, H1 fc1 output width (H for GELU, 2*H for SwiGLU:
//   [gate | up]), maxT position embeddings.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "engine/fp8_linear.h"
#include "engine/model.h"

namespace fp8scope {

// Per-layer tensors are stacked over L, llm.c style. Absent ones (biases when the config
// has none, LayerNorm biases under RMSNorm) are null.
struct ParameterTensors {
    float* wte;    // (V, C)
    float* wpe;    // (maxT, C)
    float* ln1w;   // (L, C)
    float* ln1b;   // (L, C)
    float* qkvw;   // (L, 3*C, C)
    float* qkvb;   // (L, 3*C)
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
    float* head;   // (V, C) untied output head
};

// Forward activations kept for backward, then the activation gradients of one layer
// (reused by every layer on the way back). Norm means are null under RMSNorm.
struct ActivationTensors {
    float* encoded;    // (B, T, C)
    float* ln1;        // (L, B, T, C)
    float* ln1_mean;   // (L, B, T)
    float* ln1_rstd;   // (L, B, T)
    float* qkv;        // (L, B, T, 3*C)
    float* atty;       // (L, B, T, C)
    float* att;        // (L, B, NH, T, T)
    float* residual2;  // (L, B, T, C)
    float* ln2;        // (L, B, T, C)
    float* ln2_mean;   // (L, B, T)
    float* ln2_rstd;   // (L, B, T)
    float* fch;        // (L, B, T, H1) fc1 output
    float* fch_act;    // (L, B, T, H) GELU/SwiGLU output, fc2 input
    float* smooth;     // (L, H) Smooth-SwiGLU channel scales
    float* residual3;  // (L, B, T, C)
    float* lnf;        // (B, T, C)
    float* lnf_mean;   // (B, T)
    float* lnf_rstd;   // (B, T)
    float* logits;     // (B, T, V) probabilities after forward, dlogits during backward
    float* losses;     // (B, T)
    float* proj_out;   // (B, T, C) attn.proj / mlp.fc2 output before the residual add
    float* dresidual;  // (B, T, C)
    float* dln;        // (B, T, C)
    float* dqkv;       // (B, T, 3*C)
    float* datty;      // (B, T, C)
    float* dfch;       // (B, T, H1)
    float* dfch_act;   // (B, T, H)
};

// Linear layers of block l are l*kLinearsPerBlock + these.
constexpr int kLinearsPerBlock = 4;
enum BlockLinear : int { kQkv = 0, kProj = 1, kFc1 = 2, kFc2 = 3 };

// Carves the parameter tensors out of `base` (null: only counts); returns the float count
// and, when `tensors` is given, lists them with names, shapes and offsets.
std::size_t carve_params(const ModelConfig& c, float* base, ParameterTensors& p,
                         std::vector<ParamTensor>* tensors);
// Same for the activations of a (B, T) step.
std::size_t carve_activations(const ModelConfig& c, int B, int T, float* base, ActivationTensors& a);
std::vector<LinearInfo> model_linears(const ModelConfig& c);

struct Model::Impl {
    ModelConfig config;
    std::vector<float> params, grads, acts;  // one allocation each
    ParameterTensors p{}, dp{};              // dp: the same layout over grads
    ActivationTensors a{};
    std::vector<ParamTensor> tensors;
    Fp8Linear linear;
    int B = 0, T = 0;                        // shape the activations are carved for
    std::vector<std::int32_t> tokens, targets;
    std::vector<bool> smoothed;              // per layer: fc2 ran with Smooth-SwiGLU scales
    bool have_forward = false;
    CaptureSink* sink = nullptr;
    bool capture_operands = false;

    explicit Impl(const ModelConfig& c);
    void ensure_activations(int B, int T);
    float run_forward(const std::int32_t* tokens, const std::int32_t* targets, int B, int T, bool training);
    void run_backward();
};

}  // namespace fp8scope
