// Shape and architecture of the GPT-style decoder the engine trains.
#pragma once

#include <string>

namespace fp8scope {

enum class NormKind { LayerNorm, RMSNorm };
enum class MlpKind { GELU, SwiGLU };

struct ModelConfig {
    int vocab_size = 256;  // byte-level by default
    int max_seq = 128;     // position embeddings (T <= max_seq)
    int n_layer = 4;
    int d_model = 128;
    int n_head = 4;
    int d_ff = 0;          // MLP hidden width; 0: 4*d_model (GELU), 8/3*d_model rounded to 64 (SwiGLU)
    NormKind norm = NormKind::LayerNorm;
    MlpKind mlp = MlpKind::GELU;
    bool smooth_swiglu = false;  // per-channel scaling of the SwiGLU output before FP8 (FP8.md)
    bool bias = true;            // biases on the linear layers (float32, never quantized)
    bool tie_embeddings = false; // GPT-2's tied head: logits = lnf wte^T, its gradient adds into dwte

    int hidden() const;  // d_ff resolved
    // Throws std::invalid_argument naming the field (e.g. "d_model must be divisible by n_head").
    void validate() const;
};

}  // namespace fp8scope
