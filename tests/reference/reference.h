// A deliberately simple float64 reference for quantization and statistics: plain loops,
// the scalar encode()/decode() of format.cpp, scale rules written again from FP8.md
// (frexp, brute-force exponent search) and every statistic in double, in several obvious
// passes. It shares no code with cast_rules.h, quantize.cpp, stats.cpp or analysis.cpp; the
// tests hold the fast paths against it.
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "fp8/recipe.h"
#include "fp8/stats.h"
#include "tensor.h"

namespace fp8scope::ref {

struct Quantized {
    Format format = Format::E4M3;
    std::int64_t rows = 0, cols = 0, block_rows = 1, block_cols = 1;
    std::vector<std::uint8_t> codes;    // row-major
    std::vector<float> scale_inv;       // block grid, row-major
    std::vector<std::uint8_t> e8m0;     // MX only
    std::vector<float> dequantized;     // decode(code) * scale_inv in float32
    std::int64_t overflow = 0;
};

// `delayed_scale` is the scale a delayed recipe uses (1 on its first step).
Quantized quantize(MatrixView x, const Recipe& recipe, float delayed_scale = 1.0f);

// Delayed scaling's history and scale, written out step by step.
struct Delayed {
    DelayedScaling recipe;
    std::deque<float> history;
    float scale = 1.0f;
    void push(float amax);
};

ErrorStats error_stats(MatrixView x, const Quantized& q);

// Test inputs, deterministic for a seed.
enum class DataKind {
    Gaussian,        // N(0, 1)
    OutlierColumns,  // N(0, 1) with every 7th column times 100
    Tiny,            // N(0, 1) * 1e-30: per-tensor scales far from 1, flushes under some recipes
    MixedZeros,      // half the elements exactly +-0, the rest N(0, 1) at mixed exponents
    NonFinite,       // N(0, 1) with NaN, +Inf and -Inf scattered in
};
const char* data_kind_name(DataKind k);
std::vector<float> make_data(DataKind kind, std::int64_t rows, std::int64_t cols, unsigned seed);

// a and b agree to relative tolerance `rel`; NaN matches NaN, +-Inf match themselves.
bool close(double a, double b, double rel);
TensorStats tensor_stats(MatrixView x, double outlier_k, int top_k);

}  // namespace fp8scope::ref
