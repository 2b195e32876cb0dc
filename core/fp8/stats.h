// Statistics of a tensor and of its quantization error, as FP8.md defines them.
// Everything is accumulated in float64 over the finite elements; NaN and Inf inputs are
// counted and kept out of every other figure.
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "tensor.h"

namespace fp8scope {

// floor(log2 |x|) spans every float32 exponent, subnormals included: [-149, 127].
constexpr int kHistMinExp = -149;
constexpr int kHistMaxExp = 127;
constexpr int kHistBins = kHistMaxExp - kHistMinExp + 1;

struct Log2Histogram {
    std::array<std::int64_t, kHistBins> bins{};  // bins[e - kHistMinExp] = count(floor(log2|x|) == e)
    std::int64_t zero = 0, nan = 0, inf = 0;
    std::int64_t count(int exponent) const { return bins[exponent - kHistMinExp]; }
};

struct TopValue {
    float value = 0;
    std::int64_t row = 0, col = 0;
};

struct OutlierSummary {
    double kurtosis = 0;           // m4 / m2^2 about the mean (3 for a Gaussian); NaN if m2 = 0
    double k = 0;                  // threshold in units of rms
    double frac_beyond_k_rms = 0;  // fraction of finite elements with |x| > k * rms
    std::vector<float> channel_absmax;  // per column (channel = last dimension), finite only
    std::vector<TopValue> top;          // largest |x|, descending; ties by position
};

struct TensorStats {
    std::int64_t numel = 0, finite = 0, nan = 0, inf = 0, zero = 0;
    double amax = 0;             // max |x| over finite elements
    double min_nonzero_abs = 0;  // 0 when no nonzero finite element
    double mean = 0, rms = 0, stddev = 0;  // NaN when no finite element
    double dynamic_range = 0;    // log2(amax) - log2(min_nonzero_abs); 0 when undefined
    Log2Histogram histogram;
    OutlierSummary outliers;
};

// Quantization error of one recipe on one tensor. The sums run over finite x whose x' is
// finite (x' is NaN only in MX blocks with a NaN scale: counted in nonfinite_out).
// Figures that are undefined (an all-zero tensor has no sqnr) are NaN; a perfect
// quantization has sqnr +Inf. docs/numerics.md has every definition.
struct ErrorStats {
    std::string recipe;
    double amax = 0;  // the scaling amax (NaN-ignoring, Inf-including)
    double mse = 0, sqnr_db = 0, rel_l2 = 0, max_abs_err = 0, cosine = 0;
    double underflow_pct = 0, overflow_pct = 0;
    double scale_inv_min = 0, scale_inv_max = 0;
    std::int64_t nonfinite_out = 0;  // finite inputs that dequantize to NaN (MX NaN scale)
};

struct StatsOptions {
    double outlier_k = 6.0;
    int top_k = 16;
    int threads = 0;  // 0: all hardware threads
};

}  // namespace fp8scope
