// Softmax + cross-entropy over the vocabulary, fused so backward is probs - onehot.
// Shapes: N = B*T rows, V vocabulary.
#pragma once

#include <cstdint>

namespace fp8scope::ops {

// probs (N,V) = softmax(logits) (probs may alias logits); losses (N) = -log probs[target].
// Returns the mean loss, summed in row order in double.
float softmax_ce_forward(float* probs, float* losses, const float* logits, const std::int32_t* targets,
                         std::int64_t N, int V);
// Mean of losses (N), summed in row order in double.
float mean_loss(const float* losses, std::int64_t N);
// dlogits (N,V) = (probs - onehot(target)) / N, the gradient of the mean loss (may alias probs).
// mean_over: the rows the loss is a mean over (0: N).
void softmax_ce_backward(float* dlogits, const float* probs, const std::int32_t* targets, std::int64_t N, int V,
                         std::int64_t mean_over = 0);

}  // namespace fp8scope::ops
