// Attention, one task per (batch, key/value head) in backward and per (batch, query head)
// in forward: every task reads and writes only its own slices of qkv/dqkv/att, so the
// results do not depend on how tasks land on threads (backward walks the query heads of a
// group in order, each adding into the group's dk, dv). At the engine's sizes (T up to a
// few hundred) the plain loops cost a few percent of a step; the GEMM-shaped work is in
// the linear layers. Dot products and the softmax use the lane-parallel kernels of
// vec_math.h so they vectorize.
#include "cpu/ops/attention.h"

#include <cmath>
#include <cstdint>
#include <vector>

#include "cpu/ops/vec_math.h"
#include "util/parallel.h"

namespace fp8scope::ops {

void attention_forward(float* out, float* att, const float* qkv, int B, int T, int C, int NH, int NKV) {
    const int hs = C / NH, group = NH / NKV;
    const std::int64_t W = std::int64_t(C) + 2 * std::int64_t(NKV) * hs;
    const float scale = 1.0f / std::sqrt(float(hs));
    parallel_for(std::int64_t(B) * NH, 1, 0, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t bh = begin; bh < end; ++bh) {
            const int b = int(bh / NH), h = int(bh % NH), g = h / group;
            const float* row0 = qkv + std::int64_t(b) * T * W;
            const float* qh = row0 + h * hs;
            const float* kh = row0 + C + g * hs;
            const float* vh = row0 + C + std::int64_t(NKV) * hs + g * hs;
            for (int t = 0; t < T; ++t) {
                const float* q = qh + t * W;
                float* a = att + (bh * T + t) * T;
                for (int t2 = 0; t2 <= t; ++t2) a[t2] = dot(q, kh + t2 * W, hs) * scale;
                const float maxv = max_of(a, t + 1);
                const float sum = exp_shifted_sum(a, a, maxv, t + 1);
                float inv = 1.0f / sum;
                for (int t2 = 0; t2 <= t; ++t2) a[t2] *= inv;
                for (int t2 = t + 1; t2 < T; ++t2) a[t2] = 0.0f;
                float* o = out + (std::int64_t(b) * T + t) * C + h * hs;
                for (int i = 0; i < hs; ++i) o[i] = 0.0f;
                for (int t2 = 0; t2 <= t; ++t2) {
                    const float* v = vh + t2 * W;
                    for (int i = 0; i < hs; ++i) o[i] += a[t2] * v[i];
                }
            }
        }
    });
}

void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* att,
                        int B, int T, int C, int NH, int NKV) {
    const int hs = C / NH, group = NH / NKV;
    const std::int64_t W = std::int64_t(C) + 2 * std::int64_t(NKV) * hs, KV = std::int64_t(NKV) * hs;
    const float scale = 1.0f / std::sqrt(float(hs));
    parallel_for(std::int64_t(B) * NKV, 1, 0, [&](std::int64_t begin, std::int64_t end) {
        std::vector<float> datt(T);
        for (std::int64_t bg = begin; bg < end; ++bg) {
            const int b = int(bg / NKV), g = int(bg % NKV);
            const float* row0 = qkv + std::int64_t(b) * T * W;
            float* drow0 = dqkv + std::int64_t(b) * T * W;
            const float* kh = row0 + C + g * hs;
            const float* vh = kh + KV;
            float* dkh = drow0 + C + g * hs;
            float* dvh = dkh + KV;
            for (int t = 0; t < T; ++t)
                for (int i = 0; i < hs; ++i) dkh[t * W + i] = dvh[t * W + i] = 0.0f;
            for (int h = g * group; h < (g + 1) * group; ++h) {
                const float* qh = row0 + h * hs;
                float* dqh = drow0 + h * hs;
                for (int t = 0; t < T; ++t)
                    for (int i = 0; i < hs; ++i) dqh[t * W + i] = 0.0f;
                const std::int64_t bh = std::int64_t(b) * NH + h;
                for (int t = 0; t < T; ++t) {
                    const float* a = att + (bh * T + t) * T;
                    const float* d = dout + (std::int64_t(b) * T + t) * C + h * hs;
                    const float* q = qh + t * W;
                    float* dq = dqh + t * W;
                    // out = sum_t2 a[t2] v[t2]: datt[t2] = <d, v[t2]>, dv[t2] += a[t2] d
                    float adot = 0.0f;  // sum_t2 a[t2] * datt[t2], for the softmax backward
                    for (int t2 = 0; t2 <= t; ++t2) {
                        float* dv = dvh + t2 * W;
                        float s = dot(d, vh + t2 * W, hs);
                        for (int i = 0; i < hs; ++i) dv[i] += a[t2] * d[i];
                        datt[t2] = s;
                        adot += a[t2] * s;
                    }
                    // softmax backward, then the scaled dot product q . k
                    for (int t2 = 0; t2 <= t; ++t2) {
                        float dpre = a[t2] * (datt[t2] - adot) * scale;
                        const float* k = kh + t2 * W;
                        float* dk = dkh + t2 * W;
                        for (int i = 0; i < hs; ++i) {
                            dq[i] += dpre * k[i];
                            dk[i] += dpre * q[i];
                        }
                    }
                }
            }
        }
    });
}

}  // namespace fp8scope::ops
