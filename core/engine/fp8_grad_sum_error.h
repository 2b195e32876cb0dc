// What FP8 gradient sums (engine/fp8_grad_sum.h) cost against BF16 sums, measured on a
// sample of every bucket: each rank's share of the sample is also rounded to BF16 and
// summed in BF16 over the ranks (the shadow sum: what `--grad-dtype bf16` would have
// made of the same gradients), and the FP8 sums are compared with it. The figures follow
// the quantization error's (docs/numerics.md), with the shadow sum s as the reference
// and the FP8 sum g as the quantized value:
//   snr_db        10 log10(sum s^2 / sum (g - s)^2) over the elements where both are
//                 finite; +Inf when they are equal, NaN when sum s^2 = 0
//   underflow_pct 100 * count(s finite, s != 0, g == 0) / count(s finite, s != 0)
//   overflow_pct  100 * count(s finite, g not finite) / n (a sum that left FP8's or
//                 float32's range on the way: a share near FLT_MAX whose code rounds up)
#pragma once

#include <cstdint>
#include <limits>
#include <span>

#include "backend.h"
#include "comm/communicator.h"

namespace fp8scope {

struct GradSumError {
    double snr_db = std::numeric_limits<double>::quiet_NaN();
    double underflow_pct = std::numeric_limits<double>::quiet_NaN();
    double overflow_pct = std::numeric_limits<double>::quiet_NaN();
};

// `got`: the FP8 sums; `shadow`: the BF16 shadow sums of the same gradients (their bits).
GradSumError grad_sum_error(std::span<const float> got, std::span<const std::uint16_t> shadow);

// A collective: this rank's `shares` (n float32, backend memory) rounded to BF16 into
// `shadow` (n, backend memory) and summed over the ranks there, as BF16 sums are.
void bf16_shadow_sum(Backend& backend, Communicator& comm, const float* shares, std::uint16_t* shadow,
                     std::int64_t n);

}  // namespace fp8scope
