// The optimizer's float32 ops: AdamW with weight decay inside given runs of the flat
// parameter array, and the global gradient norm (core/backend/optimizer_ops.h has the
// contracts).
#pragma once

#include <cstdint>
#include <vector>

#include "backend/optimizer_ops.h"

namespace fp8scope::ops {

// AdamW on n parameters; decays inside the `decay` runs (checked: check_decay_runs).
void adamw(float* params, const float* grads, float* m, float* v, const std::vector<DecayRun>& decay, std::int64_t n,
           const AdamWParams& p);
// sqrt of the sum of grads[i]^2, bitwise the same for any thread count.
double grad_norm(const float* grads, std::int64_t n);

}  // namespace fp8scope::ops
