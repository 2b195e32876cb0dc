// What a run's step costs on the device, by category: the figures of the Kernels view's
// stacked bar. A kernel's category is its purpose when it has one (the run's evaluation
// after the step, or capture: every record launched in a capture op, GEMMs and copies
// too, is what capture costs), else its kind by name (kernel_kind.h).
//
// Per step: the summed duration of the step's device records per category, the window
// and the busy time (the union of the records' intervals). The window is the run's
// training span (its first training record's start to its last one's end, device time)
// plus, after an eval step, its evaluation span: the other runs' steps and evaluations
// run between the two and are not this run's. Idle is window - busy: time within the
// run's spans with no kernel, copy or memset running. With one stream the categories and
// idle sum to the window; overlapping streams make the sum larger.
#pragma once

#include <QColor>
#include <QString>
#include <array>
#include <cstdint>
#include <utility>
#include <vector>

#include "models/kernel_attribution.h"
#include "models/kernel_kind.h"

namespace fp8scope::views {

enum class StepCategory { Gemm, Quantize, Capture, Attention, Optimizer, Communication, Copy, Other, Eval, Idle };
constexpr int kStepCategories = 10;

StepCategory step_category(const trace::TraceMeta& meta, const StepKernel& k);
QString step_category_name(StepCategory c);  // "GEMM", ..., "eval", "idle"
QColor step_category_color(StepCategory c);

struct StepBreakdown {
    std::int64_t step = 0;
    std::array<double, kStepCategories> ns{};  // Idle's entry is window - busy
    double window_ns = 0, busy_ns = 0;
    std::int64_t records = 0;
    // From the step's kernel sums alone (its individual records were not kept): no
    // window, busy or idle time; records counts the calls.
    bool summed = false;
};

// The summed length of the union of [start, end) intervals; reorders them.
double union_ns(std::vector<std::pair<std::int64_t, std::int64_t>>& intervals);

StepBreakdown step_breakdown(const trace::TraceMeta& meta, std::int64_t step, const std::vector<StepKernel>& kernels);
// A step without individual records, from its kernel sums [first, last).
StepBreakdown summed_breakdown(const trace::TraceMeta& meta, std::int64_t step, const trace::KernelStepRecord* first,
                               const trace::KernelStepRecord* last);
// Every step of `run` with device records or kernel sums, step ascending: from the
// records where the step has them, else from its sums.
std::vector<StepBreakdown> run_breakdown(const TraceData& d, int run);

}  // namespace fp8scope::views
