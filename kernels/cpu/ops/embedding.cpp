// Embedding lookup and its scatter-add backward. The backward runs serially over rows:
// it is O(B*T*C), far below the GEMMs, and a serial scatter needs no atomics.
#include "cpu/ops/embedding.h"

#include "util/parallel.h"

namespace fp8scope::ops {

void embedding_forward(float* out, const std::int32_t* tokens, const float* wte, const float* wpe,
                       int B, int T, int C) {
    parallel_for(std::int64_t(B) * T, 16, 0, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t n = begin; n < end; ++n) {
            const float* e = wte + std::int64_t(tokens[n]) * C;
            float* o = out + n * C;
            if (!wpe) {
                for (int c = 0; c < C; ++c) o[c] = e[c];
                continue;
            }
            const float* p = wpe + (n % T) * C;
            for (int c = 0; c < C; ++c) o[c] = e[c] + p[c];
        }
    });
}

void embedding_backward(float* dwte, float* dwpe, const float* dout, const std::int32_t* tokens,
                        int B, int T, int C) {
    for (std::int64_t n = 0; n < std::int64_t(B) * T; ++n) {
        const float* d = dout + n * C;
        float* de = dwte + std::int64_t(tokens[n]) * C;
        for (int c = 0; c < C; ++c) de[c] += d[c];
        if (!dwpe) continue;
        float* dp = dwpe + (n % T) * C;
        for (int c = 0; c < C; ++c) dp[c] += d[c];
    }
}

}  // namespace fp8scope::ops
