// The scale rules of scaling.h, out of line: cast_rules.h holds them, for every backend.
#include "fp8/scaling.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "fp8/cast_rules.h"

namespace fp8scope {

float compute_scale(float amax, Format f, float eps, bool pow2) { return cast::compute_scale(amax, f, eps, pow2); }

int mx_exponent(float block_amax, Format f, MXRule rule) { return cast::mx_exponent(block_amax, f, rule); }

void DelayedState::push(float amax) {
    history_.push_back(amax);
    const std::size_t keep = static_cast<std::size_t>(std::max(1, recipe_.history));
    while (history_.size() > keep) history_.pop_front();

    float ref = history_.back();
    if (recipe_.algo == AmaxAlgo::Max) {
        for (float h : history_) ref = (std::isnan(h) || std::isnan(ref)) ? std::numeric_limits<float>::quiet_NaN() : std::max(ref, h);
    }
    scale_ = cast::delayed_next_scale(ref, scale_, recipe_.format, recipe_.margin);
}

bool columnwise_is_transpose(const Recipe& r) {
    if (std::holds_alternative<CurrentScaling>(r) || std::holds_alternative<DelayedScaling>(r)) return true;
    if (const auto* b = std::get_if<BlockScaling>(&r)) return b->block_rows == b->block_cols;
    return false;
}

}  // namespace fp8scope
