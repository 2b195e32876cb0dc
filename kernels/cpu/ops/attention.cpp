// Attention, one task per (batch, head): every task reads and writes only its own slices
// of qkv/dqkv/att, so the results do not depend on how tasks land on threads. At the
// engine's sizes (T up to a few hundred) the plain loops cost a few percent of a step;
// the GEMM-shaped work is in the linear layers. Dot products and the softmax use the
// lane-parallel kernels of vec_math.h so they vectorize.
#include "cpu/ops/attention.h"

#include <cmath>
#include <cstdint>
#include <vector>

#include "cpu/ops/vec_math.h"
#include "util/parallel.h"

namespace fp8scope::ops {

void attention_forward(float* out, float* att, const float* qkv, int B, int T, int C, int NH) {
    const int hs = C / NH, C3 = 3 * C;
    const float scale = 1.0f / std::sqrt(float(hs));
    parallel_for(std::int64_t(B) * NH, 1, 0, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t bh = begin; bh < end; ++bh) {
            const int b = int(bh / NH), h = int(bh % NH);
            const float* base = qkv + std::int64_t(b) * T * C3 + h * hs;
            for (int t = 0; t < T; ++t) {
                const float* q = base + std::int64_t(t) * C3;
                float* a = att + (bh * T + t) * T;
                for (int t2 = 0; t2 <= t; ++t2) a[t2] = dot(q, base + std::int64_t(t2) * C3 + C, hs) * scale;
                const float maxv = max_of(a, t + 1);
                const float sum = exp_shifted_sum(a, a, maxv, t + 1);
                float inv = 1.0f / sum;
                for (int t2 = 0; t2 <= t; ++t2) a[t2] *= inv;
                for (int t2 = t + 1; t2 < T; ++t2) a[t2] = 0.0f;
                float* o = out + (std::int64_t(b) * T + t) * C + h * hs;
                for (int i = 0; i < hs; ++i) o[i] = 0.0f;
                for (int t2 = 0; t2 <= t; ++t2) {
                    const float* v = base + std::int64_t(t2) * C3 + 2 * C;
                    for (int i = 0; i < hs; ++i) o[i] += a[t2] * v[i];
                }
            }
        }
    });
}

void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* att,
                        int B, int T, int C, int NH) {
    const int hs = C / NH, C3 = 3 * C;
    const float scale = 1.0f / std::sqrt(float(hs));
    parallel_for(std::int64_t(B) * NH, 1, 0, [&](std::int64_t begin, std::int64_t end) {
        std::vector<float> datt(T);
        for (std::int64_t bh = begin; bh < end; ++bh) {
            const int b = int(bh / NH), h = int(bh % NH);
            const float* base = qkv + std::int64_t(b) * T * C3 + h * hs;
            float* dbase = dqkv + std::int64_t(b) * T * C3 + h * hs;
            for (int t = 0; t < T; ++t)
                for (int part = 0; part < 3; ++part)
                    for (int i = 0; i < hs; ++i) dbase[std::int64_t(t) * C3 + part * C + i] = 0.0f;
            for (int t = 0; t < T; ++t) {
                const float* a = att + (bh * T + t) * T;
                const float* d = dout + (std::int64_t(b) * T + t) * C + h * hs;
                const float* q = base + std::int64_t(t) * C3;
                float* dq = dbase + std::int64_t(t) * C3;
                // out = sum_t2 a[t2] v[t2]: datt[t2] = <d, v[t2]>, dv[t2] += a[t2] d
                float adot = 0.0f;  // sum_t2 a[t2] * datt[t2], for the softmax backward
                for (int t2 = 0; t2 <= t; ++t2) {
                    const float* v = base + std::int64_t(t2) * C3 + 2 * C;
                    float* dv = dbase + std::int64_t(t2) * C3 + 2 * C;
                    float s = dot(d, v, hs);
                    for (int i = 0; i < hs; ++i) dv[i] += a[t2] * d[i];
                    datt[t2] = s;
                    adot += a[t2] * s;
                }
                // softmax backward, then the scaled dot product q . k
                for (int t2 = 0; t2 <= t; ++t2) {
                    float dpre = a[t2] * (datt[t2] - adot) * scale;
                    const float* k = base + std::int64_t(t2) * C3 + C;
                    float* dk = dbase + std::int64_t(t2) * C3 + C;
                    for (int i = 0; i < hs; ++i) {
                        dq[i] += dpre * k[i];
                        dk[i] += dpre * q[i];
                    }
                }
            }
        }
    });
}

}  // namespace fp8scope::ops
