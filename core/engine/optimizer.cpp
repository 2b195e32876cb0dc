// AdamW and gradient clipping. Every element is updated independently, so the parallel
// loops cannot change results; the only reduction (the gradient norm) uses fixed chunks.
#include "engine/optimizer.h"

#include <cmath>
#include <stdexcept>
#include <string>

#include "util/parallel.h"

namespace fp8scope {

AdamW::AdamW(const OptimizerConfig& config, const std::vector<ParamTensor>& tensors, std::size_t n_params)
    : config_(config), decay_(n_params, 0), m_(n_params, 0.0f), v_(n_params, 0.0f) {
    for (const auto& t : tensors) {
        if (t.offset + t.numel() > n_params)
            throw std::invalid_argument("parameter tensor '" + t.name + "' lies outside the parameter array");
        if (t.decay) std::fill(decay_.begin() + t.offset, decay_.begin() + t.offset + t.numel(), 1);
    }
}

void AdamW::step(std::span<float> params, std::span<const float> grads, float lr, int threads) {
    if (params.size() != m_.size() || grads.size() != m_.size())
        throw std::invalid_argument("AdamW::step: " + std::to_string(params.size()) + " params, " +
                                    std::to_string(grads.size()) + " grads, optimizer holds " +
                                    std::to_string(m_.size()));
    ++t_;
    const float b1 = config_.beta1, b2 = config_.beta2, eps = config_.eps, wd = config_.weight_decay;
    // Bias corrections in double, rounded once: pow(b, t) in float loses digits for large t.
    const float c1 = static_cast<float>(1.0 - std::pow(double(b1), double(t_)));
    const float c2 = static_cast<float>(1.0 - std::pow(double(b2), double(t_)));
    float* p = params.data();
    const float* g = grads.data();
    float* m = m_.data();
    float* v = v_.data();
    const std::uint8_t* decay = decay_.data();
    parallel_for(static_cast<std::int64_t>(m_.size()), 1 << 14, threads, [&](std::int64_t b, std::int64_t e) {
        for (std::int64_t i = b; i < e; ++i) {
            m[i] = b1 * m[i] + (1.0f - b1) * g[i];
            v[i] = b2 * v[i] + (1.0f - b2) * g[i] * g[i];
            float update = (m[i] / c1) / (std::sqrt(v[i] / c2) + eps);
            if (decay[i]) update += wd * p[i];
            p[i] -= lr * update;
        }
    });
}

void AdamW::set_state(std::vector<float> m, std::vector<float> v, std::int64_t t) {
    if (m.size() != m_.size() || v.size() != v_.size())
        throw std::invalid_argument("optimizer state has " + std::to_string(m.size()) + " moments, the model " +
                                    std::to_string(m_.size()) + " parameters");
    m_ = std::move(m);
    v_ = std::move(v);
    t_ = t;
}

double global_grad_norm(std::span<const float> grads, int threads) {
    constexpr std::int64_t kChunk = 1 << 14;
    const auto n = static_cast<std::int64_t>(grads.size());
    std::vector<double> partial((n + kChunk - 1) / kChunk, 0.0);
    parallel_for(static_cast<std::int64_t>(partial.size()), 1, threads, [&](std::int64_t b, std::int64_t e) {
        for (std::int64_t c = b; c < e; ++c) {
            double s = 0.0;
            for (std::int64_t i = c * kChunk, end = std::min(n, i + kChunk); i < end; ++i)
                s += double(grads[i]) * double(grads[i]);
            partial[c] = s;
        }
    });
    double total = 0.0;
    for (double s : partial) total += s;
    return std::sqrt(total);
}

float clip_grad_norm(std::span<float> grads, double norm, float max_norm, int threads) {
    if (max_norm <= 0.0f || !(norm > max_norm)) return 1.0f;
    const auto scale = static_cast<float>(max_norm / (norm + 1e-6));
    parallel_for(static_cast<std::int64_t>(grads.size()), 1 << 14, threads, [&](std::int64_t b, std::int64_t e) {
        for (std::int64_t i = b; i < e; ++i) grads[i] *= scale;
    });
    return scale;
}

}  // namespace fp8scope
