// A backend's layer ops: the forward and backward passes of a transformer's layers other
// than its quantized linears (B batch, T time, C channels, N = B*T rows, V vocab, NH
// heads), and the unquantized output head.
//
// Activations are in the backend's activation dtype (float32 on the CPU, BF16 on a GPU);
// weights, their gradients and norm statistics are float32 everywhere.
#pragma once

#include <cstdint>

#include "backend/tensor_desc.h"

namespace fp8scope {

class LayerOps {
public:
    virtual ~LayerOps() = default;

    // out (B,T,C) = wte[tokens] (V,C) + wpe[t] (maxT,C); tokens in backend memory. wpe may
    // be null (rotary positions): then out = wte[tokens].
    virtual void embedding_forward(ActPtr out, const std::int32_t* tokens, const float* wte, const float* wpe,
                                   int B, int T, int C) = 0;
    // dwte, dwpe += dout scattered by token and position (deterministic order); dwpe may be null.
    virtual void embedding_backward(float* dwte, float* dwpe, ActPtr dout, const std::int32_t* tokens, int B,
                                    int T, int C) = 0;

    // LayerNorm (mean may not be null) or, with mean == bias == null, RMSNorm. Backward
    // adds into dinp and overwrites dweight, dbias.
    virtual void layernorm_forward(ActPtr out, float* mean, float* rstd, ActPtr inp, const float* weight,
                                   const float* bias, std::int64_t N, int C) = 0;
    virtual void layernorm_backward(ActPtr dinp, float* dweight, float* dbias, ActPtr dout, ActPtr inp,
                                    const float* weight, const float* mean, const float* rstd, std::int64_t N,
                                    int C) = 0;
    virtual void rmsnorm_forward(ActPtr out, float* rstd, ActPtr inp, const float* weight, std::int64_t N,
                                 int C) = 0;
    virtual void rmsnorm_backward(ActPtr dinp, float* dweight, ActPtr dout, ActPtr inp, const float* weight,
                                  const float* rstd, std::int64_t N, int C) = 0;

    // Causal attention over qkv (B,T,C + 2 NKV hs) = [q|k|v], hs = C / NH: NH query heads,
    // NKV key/value heads (NKV divides NH; grouped-query attention when fewer: query head h
    // reads key/value head h / (NH / NKV)). `att` keeps what backward needs
    // (attention_saved() elements); backward also gets the forward's output `out`
    // (flash attention's rowsum(dout * out)) and overwrites dqkv (a key/value head's
    // gradient sums over its query heads).
    virtual std::int64_t attention_saved(int B, int T, int NH) const = 0;
    virtual void attention_forward(ActPtr out, ActPtr att, ActPtr qkv, int B, int T, int C, int NH, int NKV) = 0;
    virtual void attention_backward(ActPtr dqkv, ActPtr dout, ActPtr qkv, ActPtr out, ActPtr att, int B, int T,
                                    int C, int NH, int NKV) = 0;
    // Rotary position embedding, in place on the q and k heads of qkv (B,T,(NH + 2 NKV) hs)
    // (v untouched), the half-split pairing of GPT-NeoX and Hugging Face's Llama: element
    // i < hs/2 of a head pairs with i + hs/2 and (x1, x2) at position t turns by angle
    // a = t theta^(-2i/hs) to (x1 cos a - x2 sin a, x2 cos a + x1 sin a). `table` (>= T, hs/2, 2)
    // holds [cos a, sin a] in float32, backend memory. `inverse` turns by -a: the backward
    // of the rotation, applied to dqkv.
    virtual void rope(ActPtr qkv, const float* table, int B, int T, int NH, int NKV, int hs, bool inverse) = 0;

    virtual void gelu_forward(ActPtr out, ActPtr inp, std::int64_t n) = 0;
    virtual void gelu_backward(ActPtr dinp, ActPtr inp, ActPtr dout, std::int64_t n) = 0;
    virtual void swiglu_forward(ActPtr out, ActPtr inp, std::int64_t N, int H) = 0;
    virtual void swiglu_backward(ActPtr dinp, ActPtr inp, ActPtr dout, std::int64_t N, int H) = 0;
    // Smooth-SwiGLU: scales (H) = 2^-floor(log2 absmax) of each channel of h (N,H).
    virtual void smooth_swiglu_scales(float* scales, ActPtr h, std::int64_t N, int H) = 0;
    // out (rows,cols) = in with column c multiplied by s[c], or divided when `inverse`.
    virtual void scale_columns(const TensorDesc& out, const TensorDesc& in, const float* s, bool inverse) = 0;
    // Outlier injection (engine/injection.h): in t (rows,cols), in place, the `count` columns
    // listed in `index` or, with `rows`, the listed rows multiplied by `factor`, each
    // product rounded once to t's dtype (float32, or BF16 on a GPU); the rest untouched.
    // `index`: int32 in backend memory, each in range, none twice.
    virtual void scale_channels(const TensorDesc& t, const std::int32_t* index, int count, bool rows,
                                float factor) = 0;
    virtual void add(ActPtr out, ActPtr a, ActPtr b, std::int64_t n) = 0;

    // probs (N,V) = softmax(logits), may alias; losses (N) = -log probs[target].
    virtual void softmax_ce_forward(ActPtr probs, float* losses, ActPtr logits, const std::int32_t* targets,
                                    std::int64_t N, int V) = 0;
    // Mean of losses (N), summed in row order in double (waits for the device).
    virtual float mean_loss(const float* losses, std::int64_t N) = 0;
    // dlogits (N,V) = (probs - onehot) / mean_over, may alias probs. mean_over: the rows the
    // loss is a mean over: N, or a data-parallel job's rows of all ranks (then the ranks'
    // gradients add up to the whole batch's, and each rank's dlogits rows are the bits one
    // process computes for them).
    virtual void softmax_ce_backward(ActPtr dlogits, ActPtr probs, const std::int32_t* targets, std::int64_t N,
                                     int V, std::int64_t mean_over) = 0;

    // The unquantized linear of the output head: out (N,M) = inp (N,K) weight (M,K)^T + bias;
    // backward: dinp = dout weight, dweight = dout^T inp, dbias = column sums (each may be null).
    virtual void matmul_forward(ActPtr out, ActPtr inp, const float* weight, const float* bias, std::int64_t N,
                                std::int64_t K, std::int64_t M) = 0;
    virtual void matmul_backward(ActPtr dinp, float* dweight, float* dbias, ActPtr dout, ActPtr inp,
                                 const float* weight, std::int64_t N, std::int64_t K, std::int64_t M) = 0;
};

}  // namespace fp8scope
