// The error of a GEMM's output against a reference output of the same shape: the sums a
// device reduces (AnalysisOps::output_error) and the figures capture records from them.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

namespace fp8scope {

struct OutputError {
    double signal = 0;     // sum of reference^2
    double error = 0;      // sum of (out - reference)^2
    float max_abs = 0;     // max |out - reference|
    std::int64_t count = 0;

    // 10 log10(signal / error): +inf without error, NaN for a zero reference with error.
    double sqnr_db() const {
        if (error == 0) return std::numeric_limits<double>::infinity();
        if (signal == 0) return std::numeric_limits<double>::quiet_NaN();
        return 10.0 * std::log10(signal / error);
    }
    // ||out - reference|| / ||reference||: 0 without error, NaN for a zero reference with error.
    double rel_err() const {
        if (error == 0) return 0.0;
        if (signal == 0) return std::numeric_limits<double>::quiet_NaN();
        return std::sqrt(error / signal);
    }
};

}  // namespace fp8scope
