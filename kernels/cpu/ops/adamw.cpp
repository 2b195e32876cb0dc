// AdamW updates every element independently, so its parallel loop cannot change results
// (simd.h's kernel: vectorized for the CPU, the same arithmetic as a scalar loop). The
// norm sums in double over fixed-size chunks, each in index order, combined in order.
#include "cpu/ops/adamw.h"

#include <algorithm>
#include <cmath>

#include "cpu/simd.h"
#include "util/parallel.h"

namespace fp8scope::ops {

void adamw(float* params, const float* g, float* m, float* v, const std::vector<DecayRun>& decay, std::int64_t n,
           const AdamWParams& p) {
    check_decay_runs(decay, n);
    const simd::AdamWArgs a{p.beta1,          p.beta2,          p.eps,       p.weight_decay, p.lr,
                            p.bias_correction1, p.bias_correction2, p.grad_scale};
    const simd::Kernels& k = simd::kernels();
    parallel_for(n, 1 << 14, 0, [&](std::int64_t i0, std::int64_t i1) {
        auto update = [&](std::int64_t b, std::int64_t e, bool d) {
            if (b < e) k.adamw(params + b, g + b, m + b, v + b, d, e - b, a);
        };
        // the runs meeting [i0, i1): decay inside them, none between
        auto r = std::upper_bound(decay.begin(), decay.end(), i0,
                                  [](std::int64_t i, const DecayRun& run) { return i < run.end; });
        std::int64_t i = i0;
        for (; r != decay.end() && r->begin < i1; ++r) {
            const std::int64_t b = std::max(r->begin, i0), e = std::min(r->end, i1);
            update(i, b, false);
            update(b, e, true);
            i = e;
        }
        update(i, i1, false);
    });
}

// A task sums 8 chunks side by side (8 independent chains instead of one, the same order
// within each chunk).
double grad_norm(const float* grads, std::int64_t n) {
    constexpr std::int64_t kChunk = 1 << 14, kSide = 8;
    const std::int64_t chunks = (n + kChunk - 1) / kChunk;
    std::vector<double> partial(std::size_t(chunks), 0.0);
    parallel_for((chunks + kSide - 1) / kSide, 1, 0, [&](std::int64_t b, std::int64_t e) {
        for (std::int64_t c0 = b * kSide; c0 < std::min(chunks, e * kSide); c0 += kSide) {
            if (c0 + kSide > chunks || (c0 + kSide) * kChunk > n) {  // the last, short group
                for (std::int64_t c = c0; c < chunks; ++c) {
                    double s = 0.0;
                    for (std::int64_t i = c * kChunk, end = std::min(n, i + kChunk); i < end; ++i)
                        s += double(grads[i]) * double(grads[i]);
                    partial[std::size_t(c)] = s;
                }
                continue;
            }
            double s[kSide] = {};
            const float* x = grads + c0 * kChunk;
            for (std::int64_t i = 0; i < kChunk; ++i)
                for (std::int64_t j = 0; j < kSide; ++j) s[j] += double(x[j * kChunk + i]) * double(x[j * kChunk + i]);
            for (std::int64_t j = 0; j < kSide; ++j) partial[std::size_t(c0 + j)] = s[j];
        }
    });
    double total = 0.0;
    for (double s : partial) total += s;
    return std::sqrt(total);
}

}  // namespace fp8scope::ops
