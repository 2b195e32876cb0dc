// MLP activations: GELU (tanh approximation, as GPT-2) and SwiGLU, plus the per-channel
// scales of Smooth-SwiGLU (FP8.md), which depend only on the SwiGLU output.
#pragma once

#include <cstdint>

namespace fp8scope::ops {

// out (n) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
void gelu_forward(float* out, const float* inp, std::int64_t n);
// dinp (n) = gelu'(inp) * dout (overwritten)
void gelu_backward(float* dinp, const float* inp, const float* dout, std::int64_t n);

// inp (N,2H) = [gate | up]; out (N,H) = silu(gate) * up
void swiglu_forward(float* out, const float* inp, std::int64_t N, int H);
// dinp (N,2H) = ... (overwritten), from dout (N,H)
void swiglu_backward(float* dinp, const float* inp, const float* dout, std::int64_t N, int H);

// Smooth-SwiGLU: scales (H) = 2^-floor(log2 absmax_j) of each channel j of h (N,H), so
// every scaled channel's absmax lies in [1, 2). Powers of two make the scaling exact in
// float32; an all-zero (or non-finite) channel gets 1.
void smooth_swiglu_scales(float* scales, const float* h, std::int64_t N, int H);
// out (rows,cols) = in with column c multiplied by s[c], or divided when `inverse` (may alias).
void scale_columns(float* out, const float* in, const float* s, bool inverse, std::int64_t rows, std::int64_t cols);

}  // namespace fp8scope::ops
