// RoPE on the CPU: one task per row of qkv; v is left as it is.
#include "cpu/ops/rope.h"

#include <cstdint>

#include "util/parallel.h"

namespace fp8scope::ops {

void rope(float* qkv, const float* table, int B, int T, int NH, int NKV, int hs, bool inverse) {
    const int half = hs / 2, heads = NH + NKV;  // q and k heads, contiguous at the row's start
    const std::int64_t W = std::int64_t(NH + 2 * NKV) * hs;
    const float sign = inverse ? -1.0f : 1.0f;
    parallel_for(std::int64_t(B) * T, 16, 0, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t n = begin; n < end; ++n) {
            const float* cs = table + (n % T) * half * 2;
            for (int h = 0; h < heads; ++h) {
                float* x = qkv + n * W + std::int64_t(h) * hs;
                for (int i = 0; i < half; ++i) {
                    const float c = cs[2 * i], s = sign * cs[2 * i + 1];
                    const float x1 = x[i], x2 = x[i + half];
                    // each product rounded on its own (no fused multiply-add): the GPU's formula
                    const float p1 = x1 * c, p2 = x2 * s, p3 = x2 * c, p4 = x1 * s;
                    x[i] = p1 - p2;
                    x[i + half] = p3 + p4;
                }
            }
        }
    });
}

}  // namespace fp8scope::ops
