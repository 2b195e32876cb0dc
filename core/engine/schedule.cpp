// Warmup + cosine, computed in double so every step's rate is the correctly rounded float.
#include "engine/schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace fp8scope {

float CosineSchedule::at(int step) const {
    if (step < warmup_steps)  // step 0 already trains, so warmup starts at lr/warmup, not 0
        return static_cast<float>(double(lr) * (step + 1) / warmup_steps);
    int decay_steps = total_steps - 1 - warmup_steps;
    if (decay_steps <= 0) return step <= warmup_steps ? lr : min_lr;
    double progress = std::min(1.0, double(step - warmup_steps) / decay_steps);
    double cosine = 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
    return static_cast<float>(double(min_lr) + cosine * (double(lr) - double(min_lr)));
}

}  // namespace fp8scope
