// The learning rate schedule: linear warmup from lr/warmup to lr over `warmup_steps`,
// then a half cosine from lr down to min_lr at the last step.
#pragma once

namespace fp8scope {

struct CosineSchedule {
    float lr = 3e-3f;
    float min_lr = 3e-4f;
    int warmup_steps = 0;
    int total_steps = 1;

    // Learning rate of step `step` (0-based). Past the last step it stays at min_lr.
    float at(int step) const;
};

}  // namespace fp8scope
