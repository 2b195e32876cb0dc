// Causal multi-head self-attention core (softmax(QK^T / sqrt(hs)) V), float32 by
// convention, with grouped-query attention: NKV key/value heads shared by NH query heads
// (NKV divides NH; NKV = NH is plain multi-head attention). The q, k, v projections and
// the output projection are linear layers of the model; this op sees only their
// activations.
// Shapes: B batch, T time, C = NH * hs channels of q and of the output, hs head size,
// W = C + 2 * NKV * hs the qkv row.
#pragma once

namespace fp8scope::ops {

// qkv (B,T,W) laid out [q | k | v]: q head h at column h*hs, k head g at C + g*hs, v head
// g at C + NKV*hs + g*hs; query head h reads key/value head h / (NH / NKV).
// out (B,T,C); att (B,NH,T,T) the attention probabilities (zero above the diagonal).
void attention_forward(float* out, float* att, const float* qkv, int B, int T, int C, int NH, int NKV);
// dqkv (B,T,W) (overwritten) from dout (B,T,C) and the saved qkv and att; a key/value
// head's gradient is the sum over its query heads, added in increasing head order.
void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* att,
                        int B, int T, int C, int NH, int NKV);

}  // namespace fp8scope::ops
