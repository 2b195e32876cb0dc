// The layer ops and the optimizer on a CUDA device: one launcher per op, each taking the
// stream it runs on, with the semantics of the matching Backend method (core/backend.h)
// and CPU op (kernels/cpu/ops). Plain C++: the CUDA backend calls these without CUDA
// headers of its own beyond the runtime's stream type.
//
// Types: activations are BF16, passed as their bits (bf16 = std::uint16_t); parameters,
// gradients, AdamW moments, norm statistics, losses and Smooth-SwiGLU scales are float32.
// Every op accumulates in float32 (double where a figure is read back: grad norm, mean
// loss) and rounds to BF16 once, on the store.
//
// Shapes: B batch, T time, C channels, N = B*T rows, V vocabulary, NH heads, hs = C/NH
// head size, H hidden width of the SwiGLU MLP, M output features of a linear layer.
//
// Determinism: every float32 gradient output (dwte, dwpe, dweight, dbias) and the grad
// norm are reductions in a fixed order that depends only on the shapes, never on the
// device's SM count or on scheduling: no float atomics. Ops that need scratch take a
// Workspace of at least the size their *_workspace() function names; the caller owns it
// (one buffer grown to the largest request serves all of them, used in stream order).
//
// Aliasing: elementwise outputs may alias their inputs (out may be a or b, probs may be
// logits, dlogits may be probs, dinp may be dout, scale_columns may run in place).
// Pointers of any alignment work; 16-byte aligned ones with widths a multiple of 8 take
// the vectorised path.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "backend.h"

namespace fp8scope::cuda {

using bf16 = std::uint16_t;  // the bits of a bfloat16 value

// Device scratch handed to an op; ops check that it is large enough. 256-byte aligned
// (as cudaMalloc returns), contents need not persist between ops.
struct Workspace {
    void* ptr = nullptr;
    std::size_t bytes = 0;
};

// --- embedding (embedding.cu) ------------------------------------------------------
// out (B,T,C) = wte[tokens] (V,C) + wpe[t] (maxT,C)
// wpe may be null (no position table): out = wte[tokens]; so may dwpe in backward.
void embedding_forward(bf16* out, const std::int32_t* tokens, const float* wte, const float* wpe, int B, int T,
                       int C, cudaStream_t stream);
// dwte (V,C), dwpe (maxT,C) += dout (B,T,C) scattered by token and position; each row
// of dwte/dwpe adds its contributions in increasing position order (bitwise the CPU's).
std::size_t embedding_backward_workspace(int B, int T);
void embedding_backward(float* dwte, float* dwpe, const bf16* dout, const std::int32_t* tokens, int B, int T, int C,
                        Workspace ws, cudaStream_t stream);

// --- norms (norm.cu) ---------------------------------------------------------------
// out (N,C) = (inp - mean) * rstd * weight + bias; mean, rstd (N) kept for backward.
// With mean == bias == null it is RMSNorm (as Backend::layernorm_forward), also in backward.
void layernorm_forward(bf16* out, float* mean, float* rstd, const bf16* inp, const float* weight, const float* bias,
                       std::int64_t N, int C, cudaStream_t stream);
// dinp (N,C) += ...; dweight, dbias (C) = ... (overwritten).
std::size_t norm_backward_workspace(std::int64_t N, int C);
void layernorm_backward(bf16* dinp, float* dweight, float* dbias, const bf16* dout, const bf16* inp,
                        const float* weight, const float* mean, const float* rstd, std::int64_t N, int C, Workspace ws,
                        cudaStream_t stream);
// out (N,C) = inp * rstd * weight, rstd (N) = 1 / sqrt(mean(inp^2) + eps).
void rmsnorm_forward(bf16* out, float* rstd, const bf16* inp, const float* weight, std::int64_t N, int C,
                     cudaStream_t stream);
// dinp (N,C) += ...; dweight (C) = ... (overwritten).
void rmsnorm_backward(bf16* dinp, float* dweight, const bf16* dout, const bf16* inp, const float* weight,
                      const float* rstd, std::int64_t N, int C, Workspace ws, cudaStream_t stream);

// --- attention (ops/attention/attention.cu, ops/attention/flash.cu) -------------------------------
// Causal attention over qkv (B,T,W) = [q|k|v], W = C + 2 NKV hs: NH query heads (q head h at
// columns h*hs), NKV key/value heads (k head g at C + g*hs, v head g at C + NKV*hs + g*hs);
// query head h reads key/value head h / (NH / NKV) (grouped-query attention; NKV = NH is
// multi-head attention), and backward sums a key/value head's gradient over its query
// heads in a fixed order. Head sizes 64 and 128 with 16-byte aligned pointers run fused
// FlashAttention-2 style kernels (no T x T matrix in memory: O(T) state and O(B NH T^2 / 2)
// bytes of BF16 scratch in backward); other head sizes below 128 run the same kernels on
// heads zero-padded to 64 or 128 in the workspace; larger ones (and unaligned pointers)
// run cuBLAS GEMMs over the materialised scores of several (batch row, head) pairs at a
// time (ops/attention/attention.cu). All are deterministic (fixed summation orders, no
// atomics). att, the state kept for backward, is the same for all: the row logsumexp
// L[b,h,t] = ln sum_{t2<=t} exp(q_t . k_t2 / sqrt(hs)) as float32 (B,NH,T), stored from the
// first 4-byte aligned address of att. attention_saved() counts BF16 elements: 2 per
// float, 2 of alignment slack, rounded up to a multiple of 8 so that buffers carved after
// att stay 16-byte aligned.
std::int64_t attention_saved(int B, int T, int NH);  // elements of att
// Scratch of forward and of backward. The fused path: none in forward; in backward about
// B*NH*T^2 bytes (the BF16 dS tiles of the causal half) plus a (B,T,C) BF16 output it
// recomputes when `out` is null. The padded path: padded copies of qkv and the output (and
// in backward of dout and dqkv) with the fused backward's scratch. The cuBLAS path: float32 + BF16 scores (6*T^2 bytes) of
// the pairs of one call (every head of a batch row, or one head of every batch row up to
// 64 MB, whichever needs fewer calls), with float32 sums of dk and dv under grouped-query
// attention; given less, it runs fewer pairs at a time (down to one, the least it accepts;
// the fused shapes' sizes include that much in case unaligned pointers send them there).
std::size_t attention_forward_workspace(int B, int T, int C, int NH, int NKV);
std::size_t attention_backward_workspace(int B, int T, int C, int NH, int NKV);
// out (B,T,C) = softmax(q k^T / sqrt(hs), causal) v; att = L (above).
void attention_forward(bf16* out, bf16* att, const bf16* qkv, int B, int T, int C, int NH, int NKV, Workspace ws,
                       cudaStream_t stream);
// dqkv (B,T,W) = ... (overwritten), from dout (B,T,C), the saved qkv and att, and `out`,
// the forward's output (B,T,C), from which the fused path takes rowsum(dout * out). out
// may be null: the fused path then recomputes it (one more forward pass).
void attention_backward(bf16* dqkv, const bf16* dout, const bf16* qkv, const bf16* out, const bf16* att, int B, int T,
                        int C, int NH, int NKV, Workspace ws, cudaStream_t stream);

// --- rotary position embedding (rope.cu) --------------------------------------------------------
// In place on the q and k heads of qkv (B,T,(NH + 2 NKV) hs), v untouched; the half-split
// pairing (element i < hs/2 with i + hs/2) turned by table[t][i] = [cos, sin] (>= T, hs/2, 2),
// float32, or by its negative with `inverse` (the backward, on dqkv). Computed in float32,
// each element rounded to BF16 once; the same formula as the CPU's (cpu/ops/rope.h).
void rope(bf16* qkv, const float* table, int B, int T, int NH, int NKV, int hs, bool inverse, cudaStream_t stream);

// --- activations (activation.cu) ---------------------------------------------------
// out (n) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
void gelu_forward(bf16* out, const bf16* inp, std::int64_t n, cudaStream_t stream);
// dinp (n) = gelu'(inp) * dout (overwritten; dinp may alias dout)
void gelu_backward(bf16* dinp, const bf16* inp, const bf16* dout, std::int64_t n, cudaStream_t stream);
// inp (N,2H) = [gate | up]; out (N,H) = silu(gate) * up
void swiglu_forward(bf16* out, const bf16* inp, std::int64_t N, int H, cudaStream_t stream);
// dinp (N,2H) = ... (overwritten), from dout (N,H)
void swiglu_backward(bf16* dinp, const bf16* inp, const bf16* dout, std::int64_t N, int H, cudaStream_t stream);
// scales (H) = 2^-floor(log2 absmax) of each channel of h (N,H), clamped to 2^+-126;
// 1 for an all-zero or non-finite channel. NaNs are ignored, as fmax does.
void smooth_swiglu_scales(float* scales, const bf16* h, std::int64_t N, int H, cudaStream_t stream);
// out (rows,cols) = in with column c multiplied by s[c], or divided when `inverse`.
void scale_columns(bf16* out, const bf16* in, const float* s, bool inverse, std::int64_t rows, std::int64_t cols,
                   cudaStream_t stream);
void scale_columns(float* out, const float* in, const float* s, bool inverse, std::int64_t rows, std::int64_t cols,
                   cudaStream_t stream);

// --- outlier injection (scale_channels.cu) -----------------------------------------
// t (rows,cols), in place: the `count` columns in `index` (device int32; rows, with
// `by_row`) multiplied by `factor`, rounded once to t's type: bitwise the CPU's result.
void scale_channels(bf16* t, std::int64_t rows, std::int64_t cols, const std::int32_t* index, int count, bool by_row,
                    float factor, cudaStream_t stream);
void scale_channels(float* t, std::int64_t rows, std::int64_t cols, const std::int32_t* index, int count, bool by_row,
                    float factor, cudaStream_t stream);

// --- softmax cross-entropy (softmax_ce.cu) -----------------------------------------
// probs (N,V) = softmax(logits) (may alias); losses (N) = -log probs[target].
void softmax_ce_forward(bf16* probs, float* losses, const bf16* logits, const std::int32_t* targets, std::int64_t N,
                        int V, cudaStream_t stream);
// mean (one float in device memory) = mean of losses (N), summed in double.
void mean_loss(float* mean, const float* losses, std::int64_t N, cudaStream_t stream);
// dlogits (N,V) = (probs - onehot(target)) / mean_over (0: N; may alias probs).
void softmax_ce_backward(bf16* dlogits, const bf16* probs, const std::int32_t* targets, std::int64_t N, int V,
                         cudaStream_t stream, std::int64_t mean_over = 0);

// --- elementwise (elementwise.cu) --------------------------------------------------
// out (n) = a + b
void add(bf16* out, const bf16* a, const bf16* b, std::int64_t n, cudaStream_t stream);
// dbias (M) = sum over rows of dout (N,M) (overwritten).
std::size_t bias_backward_workspace(std::int64_t N, std::int64_t M);
void bias_backward(float* dbias, const bf16* dout, std::int64_t N, std::int64_t M, Workspace ws,
                   cudaStream_t stream);
void bias_backward(float* dbias, const float* dout, std::int64_t N, std::int64_t M, Workspace ws,
                   cudaStream_t stream);
// x (n) *= factor
void scale(float* x, float factor, std::int64_t n, cudaStream_t stream);

// --- optimizer (adamw.cu) ----------------------------------------------------------
// AdamW on n float32 parameters, the update of core/engine/optimizer.cpp operation for
// operation (IEEE float32, no contraction): bitwise the CPU backend's result. Weight decay
// applies inside the runs (device memory, sorted and disjoint: check_decay_runs) and
// nowhere else. bf16_copy (n), when not null, receives the updated parameters rounded to
// BF16 (what f32_to_bf16 would give).
void adamw(float* params, const float* grads, float* m, float* v, const DecayRun* decay, std::int64_t runs,
           std::int64_t n, const AdamWParams& p, cudaStream_t stream, std::uint16_t* bf16_copy = nullptr);
// norm (one double in device memory) = sqrt(sum grads^2): double sums over fixed chunks
// combined in a fixed tree, bitwise the same on every run and every GPU.
std::size_t grad_norm_workspace(std::int64_t n);
void grad_norm(double* norm, const float* grads, std::int64_t n, Workspace ws, cudaStream_t stream);

}  // namespace fp8scope::cuda
