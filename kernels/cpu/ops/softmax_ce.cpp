// Fused softmax cross-entropy, one row per task; the mean over rows is summed afterwards
// in row order, so the loss is bitwise independent of the thread count. Row max, exp and
// sum use the lane-parallel kernels of vec_math.h.
#include "cpu/ops/softmax_ce.h"

#include <cmath>

#include "cpu/ops/vec_math.h"
#include "util/parallel.h"

namespace fp8scope::ops {

float softmax_ce_forward(float* probs, float* losses, const float* logits, const std::int32_t* targets,
                         std::int64_t N, int V) {
    parallel_for(N, 1, 0, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t n = begin; n < end; ++n) {
            const float* x = logits + n * V;
            float* p = probs + n * V;
            const float target_logit = x[targets[n]];  // read before an in-place write
            const float maxv = max_of(x, V);
            const double sum = exp_shifted_sum(p, x, maxv, V);
            float inv = float(1.0 / sum);
            // -log p[target] from the log-sum-exp, accurate even when p[target] underflows
            losses[n] = float(std::log(sum) - double(target_logit - maxv));
            for (int v = 0; v < V; ++v) p[v] *= inv;
        }
    });
    return mean_loss(losses, N);
}

float mean_loss(const float* losses, std::int64_t N) {
    double total = 0;
    for (std::int64_t n = 0; n < N; ++n) total += losses[n];
    return float(total / double(N));
}

void softmax_ce_backward(float* dlogits, const float* probs, const std::int32_t* targets, std::int64_t N, int V,
                         std::int64_t mean_over) {
    const float inv_n = 1.0f / float(mean_over > 0 ? mean_over : N);
    parallel_for(N, 1, 0, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t n = begin; n < end; ++n) {
            const float* p = probs + n * V;
            float* d = dlogits + n * V;
            for (int v = 0; v < V; ++v) d[v] = p[v] * inv_n;
            d[targets[n]] -= inv_n;
        }
    });
}

}  // namespace fp8scope::ops
