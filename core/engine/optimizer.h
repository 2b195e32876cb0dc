// AdamW on float32 master weights (Loshchilov & Hutter): the weight decay is decoupled
// from the gradient and applies only to parameters marked `decay` (matrices, not norms or
// biases). The moments are float32 arrays as long as the flat parameter array, in the
// backend's memory; the update runs on the backend (Backend::adamw).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "backend.h"
#include "engine/model.h"
#include "engine/train_config.h"

namespace fp8scope {

class AdamW {
public:
    // `tensors` carves the flat parameter array; their decay flags pick what decays.
    AdamW(const OptimizerConfig& config, const std::vector<ParamTensor>& tensors, std::size_t n_params,
          Backend& backend);

    // One update with learning rate `lr`:
    //   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2
    //   p -= lr * (m / (1-b1^t) / (sqrt(v / (1-b2^t)) + eps) + wd * p [decay only])
    // with g the gradient times `grad_scale` (clip_factor()). params and grads are in the
    // backend's memory; throws std::invalid_argument when their sizes differ from the
    // optimizer's.
    void step(std::span<float> params, std::span<const float> grads, float lr, float grad_scale = 1.0f);

    std::int64_t steps_taken() const { return t_; }
    std::size_t size() const { return n_; }
    // The moments, copied to the host (checkpoints) and back.
    std::vector<float> m_to_host() const;
    std::vector<float> v_to_host() const;
    void set_state(const std::vector<float>& m, const std::vector<float>& v, std::int64_t t);  // throws on sizes
    // The same within backend memory (size() floats each): rewind snapshots.
    void copy_moments_to(float* m, float* v) const;
    void copy_moments_from(const float* m, const float* v, std::int64_t t);
    // The moments in backend memory (asynchronous checkpoints copy them from there).
    const float* m_data() const { return m_.data(); }
    const float* v_data() const { return v_.data(); }
    void reset();  // zero moments, no steps taken

private:
    OptimizerConfig config_;
    Backend& backend_;
    std::size_t n_ = 0;
    std::vector<DecayRun> decay_;  // the decaying tensors' elements, merged into runs
    DeviceBuffer<float> m_, v_;
    std::int64_t t_ = 0;
};

// Gradient clipping's factor for gradients of global norm `norm`: max_norm / (norm + 1e-6)
// when the norm is above max_norm (> 0), else 1. AdamW::step applies it as it reads them.
float clip_factor(double norm, float max_norm);

}  // namespace fp8scope
