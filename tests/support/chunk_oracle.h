// The FP8 chunk rules (fp8/chunks.h) written the way the text reads, in double, on
// format.cpp's encode() and decode(): the oracle of the chunk kernels and of the FP8
// gradient sums, independent of cast.h and of the scale code they run.
#pragma once

#include <cmath>
#include <limits>

#include "fp8/format.h"

namespace fp8scope::testing {

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
