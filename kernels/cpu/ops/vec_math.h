// Small float kernels written so the compiler vectorizes them without -ffast-math:
// exp by Cody-Waite range reduction and the Cephes polynomial (within 2 ulp of expf on
// the clamped range), and reductions over 16 independent lanes combined in a fixed order.
// Every result depends only on the inputs, never on threads or on vector width.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>

namespace fp8scope::ops {

// exp(x) for x in [-87, 88]; inputs outside are clamped (exp(-87) ~ 1.6e-38 stands in for
// anything smaller, which only ever meets sums of far larger terms here).
inline float exp_approx(float x) {
    x = std::min(std::max(x, -87.0f), 88.0f);
    // n = round(x / ln2) by the 1.5 * 2^23 trick: std::floor would block vectorization.
    float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    float r = x - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    std::int32_t bits = (static_cast<std::int32_t>(n) + 127) << 23;
    return p * std::bit_cast<float>(bits);
}

inline float tanh_approx(float u) { return 1.0f - 2.0f / (exp_approx(2.0f * u) + 1.0f); }
inline float sigmoid_approx(float x) { return 1.0f / (1.0f + exp_approx(-x)); }

constexpr int kLanes = 16;

// Combines the lanes pairwise in a fixed tree.
inline float combine_lanes(float (&acc)[kLanes]) {
    for (int w = kLanes / 2; w > 0; w /= 2)
        for (int i = 0; i < w; ++i) acc[i] += acc[i + w];
    return acc[0];
}

inline float dot(const float* a, const float* b, int n) {
    float acc[kLanes] = {};
    int i = 0;
    for (; i + kLanes <= n; i += kLanes)
        for (int j = 0; j < kLanes; ++j) acc[j] += a[i + j] * b[i + j];
    for (; i < n; ++i) acc[i % kLanes] += a[i] * b[i];
    return combine_lanes(acc);
}

inline float max_of(const float* a, int n) {
    float acc[kLanes];
    for (float& v : acc) v = -INFINITY;
    int i = 0;
    for (; i + kLanes <= n; i += kLanes)
        for (int j = 0; j < kLanes; ++j) acc[j] = acc[j] > a[i + j] ? acc[j] : a[i + j];
    for (; i < n; ++i) acc[i % kLanes] = acc[i % kLanes] > a[i] ? acc[i % kLanes] : a[i];
    for (int w = kLanes / 2; w > 0; w /= 2)
        for (int j = 0; j < w; ++j) acc[j] = acc[j] > acc[j + w] ? acc[j] : acc[j + w];
    return acc[0];
}

// out[i] = exp(x[i] - shift); returns the sum of out.
inline float exp_shifted_sum(float* out, const float* x, float shift, int n) {
    float acc[kLanes] = {};
    int i = 0;
    for (; i + kLanes <= n; i += kLanes)
        for (int j = 0; j < kLanes; ++j) {
            float e = exp_approx(x[i + j] - shift);
            out[i + j] = e;
            acc[j] += e;
        }
    for (; i < n; ++i) {
        out[i] = exp_approx(x[i] - shift);
        acc[i % kLanes] += out[i];
    }
    return combine_lanes(acc);
}

}  // namespace fp8scope::ops
