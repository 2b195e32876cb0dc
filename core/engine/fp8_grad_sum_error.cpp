#include "engine/fp8_grad_sum_error.h"

#include <cmath>
#include <stdexcept>
#include <string>

#include "io/half.h"

namespace fp8scope {

GradSumError grad_sum_error(std::span<const float> got, std::span<const std::uint16_t> shadow) {
    if (got.size() != shadow.size())
        throw std::invalid_argument("gradient sum error: " + std::to_string(got.size()) + " sums against " +
                                    std::to_string(shadow.size()) + " shadow sums");
    GradSumError e;
    if (got.empty()) return e;
    double signal = 0, noise = 0;
    std::size_t nonzero = 0, underflow = 0, overflow = 0;
    for (std::size_t i = 0; i < got.size(); ++i) {
        const double s = bf16_to_float(shadow[i]), g = got[i];
        if (!std::isfinite(s)) continue;
        if (s != 0) ++nonzero, underflow += g == 0;
        if (!std::isfinite(g)) {
            ++overflow;
            continue;
        }
        signal += s * s;
        noise += (g - s) * (g - s);
    }
    if (signal > 0) e.snr_db = noise > 0 ? 10 * std::log10(signal / noise) : INFINITY;
    if (nonzero > 0) e.underflow_pct = 100.0 * double(underflow) / double(nonzero);
    e.overflow_pct = 100.0 * double(overflow) / double(got.size());
    return e;
}

void bf16_shadow_sum(Backend& backend, Communicator& comm, const float* shares, std::uint16_t* shadow,
                     std::int64_t n) {
    backend.convert(shadow, DType::BF16, shares, DType::F32, n);
    comm.all_reduce(shadow, DType::BF16, n, ReduceOp::Sum);
}

}  // namespace fp8scope
