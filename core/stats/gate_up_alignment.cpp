// gate_up_alignment(): each channel's two rows in one pass (channels spread over the
// thread pool), then the summaries in channel order, so the result does not depend on
// the thread count.
#include "stats/gate_up_alignment.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "util/parallel.h"

namespace fp8scope::stats {

GateUpAlignment gate_up_alignment(const float* fc1, std::int64_t H, std::int64_t C) {
    GateUpAlignment a;
    a.channels = H;
    if (H <= 0) return a;
    std::vector<double> cosine(std::size_t(H), 0.0), norms(std::size_t(H), 0.0);
    parallel_for(H, 16, 0, [&](std::int64_t j0, std::int64_t j1) {
        for (std::int64_t j = j0; j < j1; ++j) {
            const float* g = fc1 + j * C;
            const float* u = fc1 + (H + j) * C;
            double gu = 0, gg = 0, uu = 0;
            for (std::int64_t k = 0; k < C; ++k) {
                gu += double(g[k]) * u[k];
                gg += double(g[k]) * g[k];
                uu += double(u[k]) * u[k];
            }
            const double n = std::sqrt(gg) * std::sqrt(uu);
            // A zero row has no direction; a non-finite one is the non-finite checks' to report.
            const double c = n > 0 && std::isfinite(gu / n) ? std::clamp(gu / n, -1.0, 1.0) : 0.0;
            cosine[std::size_t(j)] = c;
            norms[std::size_t(j)] = std::isfinite(n) ? n : 0.0;
        }
    });
    std::vector<double> abs_cos(static_cast<std::size_t>(H));
    double sum = 0, best = -1;
    for (std::size_t j = 0; j < std::size_t(H); ++j) {
        abs_cos[j] = std::fabs(cosine[j]);
        sum += abs_cos[j];
        a.aligned += abs_cos[j] > kAlignedCos;
        if (const double score = abs_cos[j] * norms[j]; score > best) {
            best = score;
            a.top_channel = std::int64_t(j);
            a.top_cos = cosine[j];
            a.top_norm_product = norms[j];
        }
    }
    a.mean_abs_cos = sum / double(H);
    a.max_abs_cos = *std::max_element(abs_cos.begin(), abs_cos.end());
    const std::size_t rank = std::size_t(std::ceil(0.99 * double(H)));  // 1-based
    std::nth_element(abs_cos.begin(), abs_cos.begin() + std::ptrdiff_t(rank - 1), abs_cos.end());
    a.p99_abs_cos = abs_cos[rank - 1];
    return a;
}

}  // namespace fp8scope::stats
