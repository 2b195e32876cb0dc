// The scale rules (scaling.h): plain scalar code, the definition every backend matches.
#include "fp8/scaling.h"

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>

#include "fp8/format.h"

namespace fp8scope {

float compute_scale(float amax, Format f, float eps, bool pow2) {
    if (std::isnan(amax)) return 1.0f;
    const float a = std::max(amax, eps);
    if (a == 0.0f || std::isinf(a)) return 1.0f;
    float s = fp8_max(f) / a;
    if (std::isinf(s)) s = FLT_MAX;
    if (pow2) s = std::bit_cast<float>(std::bit_cast<std::uint32_t>(s) & 0xFF800000u);
    return s;
}

int mx_exponent(float block_amax, Format f, MXRule rule) {
    if (!(block_amax > 0.0f)) return -127;
    const std::uint32_t a = std::bit_cast<std::uint32_t>(block_amax) & ~0x80000000u;
    int e2;                 // floor(log2 amax)
    std::uint32_t frac;     // mantissa bits after the leading one, in 23 bits
    if (a < 0x00800000u) {  // subnormal: normalize
        const int lead = 31 - std::countl_zero(a);
        e2 = lead - 149;
        frac = (a << (23 - lead)) & 0x7FFFFFu;
    } else {
        e2 = static_cast<int>(a >> 23) - 127;
        frac = a & 0x7FFFFFu;
    }
    const int emax = info(f).emax;
    int e = e2 - emax;
    // fp8_max is 1.75 * 2^emax in both formats: amax needs one more power of two
    // exactly when its mantissa exceeds 1.75.
    if (rule == MXRule::RCeil && frac > 0x600000u) ++e;
    return std::clamp(e, -127, 127);
}

void DelayedState::push(float amax) {
    history_.push_back(amax);
    const std::size_t keep = static_cast<std::size_t>(std::max(1, recipe_.history));
    while (history_.size() > keep) history_.pop_front();

    float ref = history_.back();
    if (recipe_.algo == AmaxAlgo::Max) {
        for (float h : history_) ref = (std::isnan(h) || std::isnan(ref)) ? std::numeric_limits<float>::quiet_NaN() : std::max(ref, h);
    }
    if (std::isnan(ref) || std::isinf(ref) || ref == 0.0f) return;  // keep the previous scale
    float s = std::ldexp(fp8_max(recipe_.format) / ref, -recipe_.margin);
    if (std::isinf(s)) s = FLT_MAX;
    if (s == 0.0f) return;  // a margin so large the scale underflows: keep the previous one
    scale_ = s;
}

bool columnwise_is_transpose(const Recipe& r) {
    if (std::holds_alternative<CurrentScaling>(r) || std::holds_alternative<DelayedScaling>(r)) return true;
    if (const auto* b = std::get_if<BlockScaling>(&r)) return b->block_rows == b->block_cols;
    return false;
}

}  // namespace fp8scope
