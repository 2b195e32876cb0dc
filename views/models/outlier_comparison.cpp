// Comparing two runs' outlier figures.
#include "models/outlier_comparison.h"

#include <cmath>

#include "models/run_comparison.h"

namespace fp8scope::views {

std::int64_t common_capture_step(const RunData& a, const RunData& b, std::int64_t step) {
    return newest_common_step(a.capture_steps, b.capture_steps, step);
}

const OperandSummary* operand_at_capture(const RunData& rd, std::int64_t step, const OperandRef& ref) {
    const std::ptrdiff_t cap = rd.capture_index_at(step);
    return cap >= 0 && rd.capture_steps[cap] == step ? rd.operand(cap, ref) : nullptr;
}

std::vector<KurtosisPair> kurtosis_pairs(const TraceData& d, const RunData& run, const RunData& other, Gemm gemm,
                                         Operand operand, std::int64_t step) {
    std::vector<KurtosisPair> out;
    if (step < 0) return out;
    // Only a capture at exactly `step`: an older one would pair figures of two steps.
    auto kurtosis = [&](const RunData& rd, int linear) {
        const OperandSummary* o = operand_at_capture(rd, step, {linear, gemm, operand});
        return o ? double(o->figures[&OutlierSummary::kurtosis]) : NAN;
    };
    for (int l = 0; l < static_cast<int>(d.meta.linears.size()); ++l) {
        const KurtosisPair p{l, kurtosis(run, l), kurtosis(other, l)};
        if (!std::isnan(p.run) || !std::isnan(p.other)) out.push_back(p);
    }
    return out;
}

}  // namespace fp8scope::views
