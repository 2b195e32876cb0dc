// The FP8 chunk rules (fp8/chunks.h) written the way the text reads, in double, on
// format.cpp's encode() and decode(): the oracle of the chunk kernels and of the FP8
// gradient sums, independent of cast_rules.h and of the scale code they run; and the awkward
// data the chunk kernels' tests run on.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "fp8/format.h"

namespace fp8scope::testing {

// Log-uniform magnitudes over 2^-40 .. 2^20 (subnormal codes, flushes to zero), random
// signs, zeros, ties of the FP8 grids (17 = 10001b is one of E4M3's, 9 = 1001b one of
// E5M2's; scales are powers of two), and with `nonfinite` NaN, +Inf and -Inf.
inline std::vector<float> chunk_test_values(std::int64_t n, unsigned seed, bool nonfinite) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<double> u(0, 1);
    std::vector<float> x(static_cast<std::size_t>(n));
    for (auto& v : x) {
        const double r = u(rng);
        v = r < 0.05 ? 0.0f : static_cast<float>(std::exp2(-40 + 60 * u(rng)) * (u(rng) < 0.5 ? -1 : 1));
        if (r > 0.95) v = static_cast<float>(std::ldexp(u(rng) < 0.5 ? 9.0 : 17.0, int(-10 * u(rng))));
    }
    if (nonfinite && n > 3) {
        x[1] = std::numeric_limits<float>::quiet_NaN();
        x[std::size_t(n) / 2] = std::numeric_limits<float>::infinity();
        x[std::size_t(n) - 1] = -std::numeric_limits<float>::infinity();
    }
    return x;
}

// max |x| over x[0, n): NaN ignored, Inf included.
inline double chunk_amax(const float* x, std::int64_t n) {
    double m = 0;
    for (std::int64_t i = 0; i < n; ++i)
        if (!std::isnan(x[i])) m = std::fmax(m, std::fabs(double(x[i])));
    return m;
}

// The largest power of two s with amax * s <= fp8_max; 1 for an amax of 0 or Inf.
inline double chunk_scale(double amax, Format f) {
    if (amax == 0 || std::isinf(amax)) return 1;
    int e = 0;
    std::frexp(double(fp8_max(f)) / amax, &e);  // quotient = m 2^e, m in [0.5, 1)
    return std::ldexp(1.0, e - 1);
}

// x cast with scale s and dequantized; NaN for NaN and Inf.
inline double chunk_value(float x, double s, Format f) {
    if (!std::isfinite(x)) return std::numeric_limits<double>::quiet_NaN();
    return double(decode(f, encode(f, static_cast<float>(double(x) * s)))) / s;
}

}  // namespace fp8scope::testing
