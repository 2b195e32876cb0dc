// Token + position embedding: the first op of the model, kept in float32 (FP8.md).
// Shapes: B batch, T time, C channels; N = B*T rows.
#pragma once

#include <cstdint>

namespace fp8scope::ops {

// out (B,T,C) = wte[tokens[b,t]] (V,C) + wpe[t] (maxT,C); wpe may be null (no position table)
void embedding_forward(float* out, const std::int32_t* tokens, const float* wte, const float* wpe,
                       int B, int T, int C);
// dwte (V,C), dwpe (maxT,C; may be null) += scattered dout (B,T,C). Rows are added in order, so the
// result is deterministic even when a token repeats.
void embedding_backward(float* dwte, float* dwpe, const float* dout, const std::int32_t* tokens,
                        int B, int T, int C);

}  // namespace fp8scope::ops
