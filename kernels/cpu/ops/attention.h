// Causal multi-head self-attention core (softmax(QK^T / sqrt(hs)) V), float32 by
// convention. The q, k, v projections and the output projection are linear layers of
// the model; this op sees only their activations.
// Shapes: B batch, T time, C channels, NH heads, hs = C / NH.
#pragma once

namespace fp8scope::ops {

// qkv (B,T,3C) laid out [q | k | v], each C = NH * hs wide, head h at columns h*hs.
// out (B,T,C); att (B,NH,T,T) the attention probabilities (zero above the diagonal).
void attention_forward(float* out, float* att, const float* qkv, int B, int T, int C, int NH);
// dqkv (B,T,3C) = ... (overwritten), from dout (B,T,C) and the saved qkv and att.
void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* att,
                        int B, int T, int C, int NH);

}  // namespace fp8scope::ops
