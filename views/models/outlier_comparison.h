// The Outliers view's comparison of two runs: the capture step both recorded, and each
// linear's kurtosis in both runs at it. Figures of two runs are compared at one step: a
// merged trace's runs can capture on other cadences.
#pragma once

#include <cstdint>
#include <vector>

#include "models/series_store.h"

namespace fp8scope::views {

// The newest capture step <= `step` that both runs recorded; -1 when there is none.
std::int64_t common_capture_step(const RunData& a, const RunData& b, std::int64_t step);

// `rd`'s record of `ref` at capture step `step` exactly; nullptr when it has none there.
const OperandSummary* operand_at_capture(const RunData& rd, std::int64_t step, const OperandRef& ref);

// One linear's kurtosis of an operand kind in the selected run and in the compared one;
// NaN where that run has no record of it.
struct KurtosisPair {
    int linear;
    double run, other;
};
// The linears where either run recorded `gemm`'s `operand` at capture step `step` (a step
// both recorded: common_capture_step), ascending.
std::vector<KurtosisPair> kurtosis_pairs(const TraceData& d, const RunData& run, const RunData& other, Gemm gemm,
                                         Operand operand, std::int64_t step);

}  // namespace fp8scope::views
