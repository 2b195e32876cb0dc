// AdamW and gradient clipping over the backend's memory.
#include "engine/optimizer.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace fp8scope {

AdamW::AdamW(const OptimizerConfig& config, const std::vector<ParamTensor>& tensors, std::size_t n_params,
             Backend& backend)
    : config_(config), backend_(backend), n_(n_params), m_(backend, n_params), v_(backend, n_params) {
    for (const auto& t : tensors) {
        if (t.offset + t.numel() > n_params)
            throw std::invalid_argument("parameter tensor '" + t.name + "' lies outside the parameter array");
        if (t.decay && t.numel() > 0)
            decay_.push_back({std::int64_t(t.offset), std::int64_t(t.offset + t.numel())});
    }
    // The union of the decaying tensors: sorted, overlapping or touching runs merged.
    std::sort(decay_.begin(), decay_.end(), [](const DecayRun& a, const DecayRun& b) { return a.begin < b.begin; });
    std::vector<DecayRun> merged;
    for (const DecayRun& r : decay_) {
        if (!merged.empty() && r.begin <= merged.back().end) merged.back().end = std::max(merged.back().end, r.end);
        else merged.push_back(r);
    }
    decay_ = std::move(merged);
}

void AdamW::step(std::span<float> params, std::span<const float> grads, float lr, float grad_scale) {
    if (params.size() != n_ || grads.size() != n_)
        throw std::invalid_argument("AdamW::step: " + std::to_string(params.size()) + " params, " +
                                    std::to_string(grads.size()) + " grads, optimizer holds " + std::to_string(n_));
    ++t_;
    AdamWParams p;
    p.lr = lr;
    p.beta1 = config_.beta1;
    p.beta2 = config_.beta2;
    p.eps = config_.eps;
    p.weight_decay = config_.weight_decay;
    p.grad_scale = grad_scale;
    // Bias corrections in double, rounded once: pow(b, t) in float loses digits for large t.
    p.bias_correction1 = static_cast<float>(1.0 - std::pow(double(p.beta1), double(t_)));
    p.bias_correction2 = static_cast<float>(1.0 - std::pow(double(p.beta2), double(t_)));
    backend_.adamw(params.data(), grads.data(), m_.data(), v_.data(), decay_, std::int64_t(n_), p);
}

std::vector<float> AdamW::m_to_host() const {
    std::vector<float> out(n_);
    backend_.copy_to_host(out.data(), m_.data(), sizeof(float) * n_);
    return out;
}

std::vector<float> AdamW::v_to_host() const {
    std::vector<float> out(n_);
    backend_.copy_to_host(out.data(), v_.data(), sizeof(float) * n_);
    return out;
}

void AdamW::set_state(const std::vector<float>& m, const std::vector<float>& v, std::int64_t t) {
    if (m.size() != n_ || v.size() != n_)
        throw std::invalid_argument("optimizer state has " + std::to_string(m.size()) + " moments, the model " +
                                    std::to_string(n_) + " parameters");
    backend_.copy_from_host(m_.data(), m.data(), sizeof(float) * n_);
    backend_.copy_from_host(v_.data(), v.data(), sizeof(float) * n_);
    t_ = t;
}

void AdamW::copy_moments_to(float* m, float* v) const {
    backend_.copy(m, m_.data(), sizeof(float) * n_);
    backend_.copy(v, v_.data(), sizeof(float) * n_);
}

void AdamW::copy_moments_from(const float* m, const float* v, std::int64_t t) {
    backend_.copy(m_.data(), m, sizeof(float) * n_);
    backend_.copy(v_.data(), v, sizeof(float) * n_);
    t_ = t;
}

void AdamW::reset() {
    backend_.fill_zero(m_.data(), sizeof(float) * n_);
    backend_.fill_zero(v_.data(), sizeof(float) * n_);
    t_ = 0;
}

float clip_factor(double norm, float max_norm) {
    if (max_norm <= 0.0f || !(norm > max_norm)) return 1.0f;
    return static_cast<float>(max_norm / (norm + 1e-6));
}

}  // namespace fp8scope
