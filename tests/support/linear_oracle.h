// The float64 oracle of a quantized linear layer's GEMMs, shared by the layer's tests:
// operands quantized by quantize() + dequantize() in their GEMM's orientation (the test
// transposes explicitly), then a float64 GEMM; random and row-scaled operands.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <random>
#include <vector>

#include "backend/tensor_desc.h"
#include "cpu/quantize.h"
#include "fp8/recipe.h"

namespace fp8scope::testing {

using Vec = std::vector<double>;

// A host float32 activation as the layer takes it.
inline ActPtr act(std::vector<float>& v) { return ActPtr{reinterpret_cast<std::byte*>(v.data()), DType::F32}; }

inline std::vector<float> randn(std::size_t n, unsigned seed, float scale = 1.0f) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> d(0.0f, scale);
    std::vector<float> v(n);
    for (auto& x : v) x = d(rng);
    return v;
}

inline std::vector<float> transposed(const std::vector<float>& m, std::int64_t rows, std::int64_t cols) {
    std::vector<float> t(m.size());
    for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t c = 0; c < cols; ++c) t[std::size_t(c * rows + r)] = m[std::size_t(r * cols + c)];
    return t;
}

// The values a GEMM should see: quantize + dequantize along the last dimension (or the
// input when unquantized); `state`: delayed scaling's, pushed as the cast would.
inline std::vector<float> fake_q(const std::vector<float>& v, std::int64_t rows, std::int64_t cols,
                                 const std::optional<Recipe>& r, DelayedState* state = nullptr) {
    if (!r) return v;
    QuantizedTensor q = quantize(MatrixView{v.data(), rows, cols}, *r, state);
    std::vector<float> out(v.size());
    dequantize(q, out.data());
    return out;
}

// c (m,n) = a (m,k) b (n,k)^T in float64
inline Vec gemm_nt(const std::vector<float>& a, const std::vector<float>& b, std::int64_t m, std::int64_t n,
                   std::int64_t k) {
    Vec c(std::size_t(m * n));
    for (std::int64_t i = 0; i < m; ++i)
        for (std::int64_t j = 0; j < n; ++j) {
            double s = 0;
            for (std::int64_t p = 0; p < k; ++p) s += double(a[std::size_t(i * k + p)]) * b[std::size_t(j * k + p)];
            c[std::size_t(i * n + j)] = s;
        }
    return c;
}

// max |got - want| relative to max |want|
inline double rel_error(const std::vector<float>& got, const Vec& want) {
    double err = 0, scale = 0;
    for (std::size_t i = 0; i < want.size(); ++i) {
        err = std::max(err, std::abs(got[i] - want[i]));
        scale = std::max(scale, std::abs(want[i]));
    }
    return err / scale;
}

// Row r of the matrix (rows x cols) times 2^-18 when r is odd (or, inverse, divided by
// it): a block across rows then pushes the small rows into FP8's subnormals, which a
// block along a row does not, so a cast in the wrong orientation shows.
inline void scale_odd_rows(std::vector<float>& m, std::int64_t cols, bool inverse) {
    const float f = std::ldexp(1.0f, inverse ? 18 : -18);
    for (std::size_t i = 0; i < m.size(); ++i)
        if ((std::int64_t(i) / cols) % 2 == 1) m[i] *= f;
}

}  // namespace fp8scope::testing
