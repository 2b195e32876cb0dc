// Shape and architecture of the decoder the engine trains: GPT-2 style (LayerNorm, GELU,
// learned positions, biases) or Llama style (RMSNorm, SwiGLU, rotary positions, grouped-
// query attention, no biases), and any mix of the two.
#pragma once

#include <string>
#include <vector>

namespace fp8scope {

enum class NormKind { LayerNorm, RMSNorm };
enum class MlpKind { GELU, SwiGLU };
enum class PosKind { Learned, Rope };  // a learned position table (wpe) or rotary embeddings

struct ModelConfig {
    int vocab_size = 256;  // byte-level by default
    int max_seq = 128;     // longest sequence (the position table's rows, or RoPE's table)
    int n_layer = 4;
    int d_model = 128;
    int n_head = 4;
    int n_kv_head = 0;     // key/value heads (grouped-query attention); 0: n_head
    int d_ff = 0;          // MLP hidden width; 0: 4*d_model (GELU), 8/3*d_model rounded to 64 (SwiGLU)
    NormKind norm = NormKind::LayerNorm;
    MlpKind mlp = MlpKind::GELU;
    PosKind pos = PosKind::Learned;
    float rope_theta = 10000.0f; // RoPE base: pair i of a head turns by t * theta^(-2i/head_dim)
    bool smooth_swiglu = false;  // per-channel scaling of the SwiGLU output before FP8 (FP8.md)
    bool bias = true;            // biases on the linear layers (float32, never quantized)
    bool tie_embeddings = false; // GPT-2's tied head: logits = lnf wte^T, its gradient adds into dwte
    float init_std = 0.02f;      // std of the initial matrices (GPT-2's 0.02)

    int hidden() const;    // d_ff resolved
    int kv_heads() const { return n_kv_head > 0 ? n_kv_head : n_head; }
    int head_dim() const { return d_model / n_head; }
    // Output width of attn.qkv: (n_head + 2 n_kv_head) head_dim, laid out [q | k | v].
    int qkv_width() const { return (n_head + 2 * kv_heads()) * head_dim(); }
    // Throws std::invalid_argument naming the field (e.g. "d_model must be divisible by n_head").
    void validate() const;
};

// The field defaults of an architecture: "gpt" (LayerNorm, GELU, learned positions,
// biases) or "llama" (RMSNorm, SwiGLU, RoPE, no biases). Other fields keep their values.
// Throws std::invalid_argument for another name.
void apply_arch(ModelConfig& c, const std::string& arch);

// RoPE's [cos, sin] table (T, head_dim/2, 2) of positions 0..T-1: pair i at position t
// turns by t * theta^(-2i/head_dim), computed in double.
std::vector<float> rope_table(int T, int head_dim, double theta);

}  // namespace fp8scope
