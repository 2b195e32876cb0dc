// Normalisation layers (float32 by convention): LayerNorm (weight and bias) and RMSNorm
// (weight only), over the last dimension C of N rows. Forward keeps the per-row
// statistics (mean, rstd) that backward needs.
#pragma once

#include <cstdint>

namespace fp8scope::ops {

constexpr float kNormEps = 1e-5f;

// out (N,C) = (inp - mean) * rstd * weight + bias; mean, rstd (N)
void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                       const float* bias, std::int64_t N, int C);
// dinp (N,C) += ...; dweight, dbias (C) = ... (overwritten)
void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                        const float* weight, const float* mean, const float* rstd, std::int64_t N, int C);

// out (N,C) = inp * rstd * weight, rstd = 1 / sqrt(mean(inp^2) + eps); rstd (N)
void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* weight, std::int64_t N, int C);
// dinp (N,C) += ...; dweight (C) = ...
void rmsnorm_backward(float* dinp, float* dweight, const float* dout, const float* inp, const float* weight,
                      const float* rstd, std::int64_t N, int C);

}  // namespace fp8scope::ops
