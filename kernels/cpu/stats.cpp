// Statistics of a tensor and of the error of an already quantized tensor.
// tensor_stats is the fused analysis with no recipe (analysis.cpp), so the two can never
// disagree. error_stats is the plain path for a QuantizedTensor the caller already holds:
// decode table, block scale_inv, float64 sums in fixed row chunks combined in order.
#include "cpu/stats.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "cpu/analysis.h"
#include "util/parallel.h"

namespace fp8scope {
namespace {

struct Sums {
    double amax = 0, sxx = 0, sdd = 0, sqq = 0, sxq = 0, max_err = 0;
    std::int64_t finite = 0, nonzero = 0, underflow = 0, nonfinite_out = 0;
};

}  // namespace

TensorStats tensor_stats(MatrixView x, const StatsOptions& opt) { return analyze(x, {}, opt).tensor; }

ErrorStats error_stats(MatrixView x, const QuantizedTensor& q, const std::string& recipe) {
    if (q.rows != x.rows || q.cols != x.cols || static_cast<std::int64_t>(q.codes.size()) != x.size())
        throw std::invalid_argument("error_stats for " + recipe + ": quantized tensor is " + std::to_string(q.rows) +
                                    "x" + std::to_string(q.cols) + ", input is " + std::to_string(x.rows) + "x" +
                                    std::to_string(x.cols));
    const float* table = decode_table(q.format);
    // Fixed row chunks (independent of the thread count) combined in order.
    const std::int64_t rows_per_task = std::max<std::int64_t>(1, (1 << 16) / std::max<std::int64_t>(1, x.cols));
    const std::int64_t tasks = (x.rows + rows_per_task - 1) / rows_per_task;
    std::vector<Sums> parts(tasks);
    ThreadPool::shared().run(tasks, [&](std::int64_t t) {
        Sums s;
        const std::int64_t r1 = std::min(x.rows, (t + 1) * rows_per_task);
        for (std::int64_t r = t * rows_per_task; r < r1; ++r) {
            for (std::int64_t c = 0; c < x.cols; ++c) {
                const float xv = x.data[r * x.cols + c];
                if (!std::isnan(xv)) s.amax = std::max(s.amax, static_cast<double>(std::fabs(xv)));
                if (!std::isfinite(xv)) continue;
                ++s.finite;
                const float code_value = table[q.codes[r * x.cols + c]];
                if (xv != 0) {
                    ++s.nonzero;
                    s.underflow += code_value == 0.0f;
                }
                const float deq = code_value * q.scale_inv_at(r, c);
                if (!std::isfinite(deq)) {
                    ++s.nonfinite_out;
                    continue;
                }
                const double xd = xv, qd = deq, d = qd - xd;
                s.sxx += xd * xd;
                s.sdd += d * d;
                s.sqq += qd * qd;
                s.sxq += xd * qd;
                s.max_err = std::max(s.max_err, std::fabs(d));
            }
        }
        parts[t] = s;
    });
    Sums s;
    for (const Sums& p : parts) {
        s.amax = std::max(s.amax, p.amax);
        s.sxx += p.sxx;
        s.sdd += p.sdd;
        s.sqq += p.sqq;
        s.sxq += p.sxq;
        s.max_err = std::max(s.max_err, p.max_err);
        s.finite += p.finite;
        s.nonzero += p.nonzero;
        s.underflow += p.underflow;
        s.nonfinite_out += p.nonfinite_out;
    }

    // The figures, finished as the fused analysis finishes them.
    ErrorTotals totals;
    totals.sxx = s.sxx;
    totals.sdd = s.sdd;
    totals.sqq = s.sqq;
    totals.sxq = s.sxq;
    totals.max_err = s.max_err;
    totals.underflow = s.underflow;
    totals.overflow = q.overflow;
    totals.nonfinite_out = s.nonfinite_out;
    for (float si : q.scale_inv) {
        if (std::isnan(si)) continue;  // MX blocks with a NaN scale
        totals.scale_inv_min = std::min(totals.scale_inv_min, si);
        totals.scale_inv_max = std::max(totals.scale_inv_max, si);
    }
    TensorStats t;
    t.numel = x.size();
    t.finite = s.finite;
    t.zero = s.finite - s.nonzero;
    ErrorStats e = finish_error(recipe, static_cast<float>(s.amax), totals, t, std::nullopt);
    return e;
}

}  // namespace fp8scope
