// AdamW on float32 master weights (Loshchilov & Hutter): the weight decay is decoupled
// from the gradient and applies only to parameters marked `decay` (matrices, not norms or
// biases). The moments are float32 arrays as long as the flat parameter array, so a
// checkpoint stores them as they are.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/model.h"
#include "engine/train_config.h"

namespace fp8scope {

class AdamW {
public:
    // `tensors` carves the flat parameter array; their decay flags pick what decays.
    AdamW(const OptimizerConfig& config, const std::vector<ParamTensor>& tensors, std::size_t n_params);

    // One update with learning rate `lr`:
    //   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2
    //   p -= lr * (m / (1-b1^t) / (sqrt(v / (1-b2^t)) + eps) + wd * p [decay only])
    void step(std::span<float> params, std::span<const float> grads, float lr, int threads = 0);

    std::int64_t steps_taken() const { return t_; }
    std::span<float> m() { return m_; }
    std::span<float> v() { return v_; }
    std::span<const float> m() const { return m_; }
    std::span<const float> v() const { return v_; }
    void set_state(std::vector<float> m, std::vector<float> v, std::int64_t t);  // from a checkpoint

private:
    OptimizerConfig config_;
    std::vector<std::uint8_t> decay_;  // per element: 1 where weight decay applies
    std::vector<float> m_, v_;
    std::int64_t t_ = 0;
};

// Global L2 norm of the gradients, accumulated in double in fixed-size chunks combined in
// order, so it is bitwise the same for any thread count.
double global_grad_norm(std::span<const float> grads, int threads = 0);
// Scales the gradients so their global norm is at most `max_norm`; returns the factor (<= 1).
float clip_grad_norm(std::span<float> grads, double norm, float max_norm, int threads = 0);

}  // namespace fp8scope
