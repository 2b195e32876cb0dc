// Per-step device time by category.
#include "models/kernel_breakdown.h"

#include <algorithm>

namespace fp8scope::views {

StepCategory step_category(const trace::TraceMeta& meta, const StepKernel& k) {
    if (k.eval) return StepCategory::Eval;
    const int parent = k.rec.parent;
    if (parent >= 0 && parent < static_cast<int>(meta.ops.size()) && meta.ops[static_cast<std::size_t>(parent)] == "capture")
        return StepCategory::Capture;
    switch (kernel_kind(meta, k.rec)) {
        case KernelKind::Gemm: return StepCategory::Gemm;
        case KernelKind::Quantize: return StepCategory::Quantize;
        case KernelKind::Capture: return StepCategory::Capture;
        case KernelKind::Attention: return StepCategory::Attention;
        case KernelKind::Optimizer: return StepCategory::Optimizer;
        case KernelKind::Communication: return StepCategory::Communication;
        case KernelKind::Copy: return StepCategory::Copy;
        default: return StepCategory::Other;
    }
}

QString step_category_name(StepCategory c) {
    if (c == StepCategory::Eval) return QStringLiteral("eval");
    if (c == StepCategory::Idle) return QStringLiteral("idle");
    return kernel_kind_name(static_cast<KernelKind>(static_cast<int>(c) + 1));
}

QColor step_category_color(StepCategory c) {
    if (c == StepCategory::Eval) return QColor(0x8c, 0x8c, 0x3c);
    if (c == StepCategory::Idle) return QColor(0xe8, 0xe8, 0xe8);
    return kernel_kind_color(static_cast<KernelKind>(static_cast<int>(c) + 1));
}

double union_ns(std::vector<std::pair<std::int64_t, std::int64_t>>& v) {
    std::sort(v.begin(), v.end());
    double total = 0;
    std::int64_t lo = 0, hi = 0;
    bool open = false;
    for (auto [s, e] : v) {
        e = std::max(e, s);
        if (open && s <= hi) {
            hi = std::max(hi, e);
            continue;
        }
        if (open) total += static_cast<double>(hi - lo);
        lo = s;
        hi = e;
        open = true;
    }
    if (open) total += static_cast<double>(hi - lo);
    return total;
}

StepBreakdown step_breakdown(const trace::TraceMeta& meta, std::int64_t step, const std::vector<StepKernel>& kernels) {
    StepBreakdown b;
    b.step = step;
    if (kernels.empty()) return b;
    std::vector<std::pair<std::int64_t, std::int64_t>> spans;
    std::int64_t t0[2] = {INT64_MAX, INT64_MAX}, t1[2] = {INT64_MIN, INT64_MIN};  // training, evaluation
    for (const StepKernel& k : kernels) {
        const std::int64_t end = std::max(k.rec.end_ns, k.rec.start_ns);
        b.ns[static_cast<std::size_t>(step_category(meta, k))] += static_cast<double>(end - k.rec.start_ns);
        spans.emplace_back(k.rec.start_ns, end);
        t0[k.eval] = std::min(t0[k.eval], k.rec.start_ns);
        t1[k.eval] = std::max(t1[k.eval], end);
    }
    b.records = static_cast<std::int64_t>(kernels.size());
    for (int part : {0, 1})
        if (t1[part] >= t0[part]) b.window_ns += static_cast<double>(t1[part] - t0[part]);
    b.busy_ns = union_ns(spans);
    b.ns[static_cast<std::size_t>(StepCategory::Idle)] = b.window_ns - b.busy_ns;
    return b;
}

StepBreakdown summed_breakdown(const trace::TraceMeta& meta, std::int64_t step, const trace::KernelStepRecord* first,
                               const trace::KernelStepRecord* last) {
    StepBreakdown b;
    b.step = step;
    b.summed = true;
    for (const trace::KernelStepRecord* k = first; k != last; ++k) {
        b.ns[static_cast<std::size_t>(step_category(meta, summed_kernel(meta, *k)))] += static_cast<double>(k->total_ns);
        b.records += k->count;
    }
    return b;
}

std::vector<StepBreakdown> run_breakdown(const TraceData& d, int run) {
    std::vector<StepBreakdown> out;
    if (run < 0 || run >= static_cast<int>(d.runs.size())) return out;
    const RunData& rd = d.runs[static_cast<std::size_t>(run)];
    const OpList& ops = rd.ops;
    for (std::size_t i = 0; i < ops.size();) {
        const std::int64_t step = ops.step(i);
        const std::vector<StepKernel> k = step_kernels(d, run, step);
        if (!k.empty()) out.push_back(step_breakdown(d.meta, step, k));
        while (i < ops.size() && ops.step(i) == step) ++i;
    }
    // The steps whose records were not kept, from their sums, in step order among the others;
    // then a large trace's decimated steps (steps none of the others has).
    const auto by_step = [](const StepBreakdown& a, const StepBreakdown& b) { return a.step < b.step; };
    for (const auto* sums : {&rd.kernel_steps, &rd.kernel_steps_decimated}) {
        const std::size_t recorded = out.size();
        for (std::size_t i = 0; i < sums->size();) {
            std::size_t j = i;
            while (j < sums->size() && (*sums)[j].step == (*sums)[i].step) ++j;
            const auto at = std::lower_bound(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(recorded), (*sums)[i].step,
                                             [](const StepBreakdown& b, std::int64_t s) { return b.step < s; });
            if (at == out.begin() + static_cast<std::ptrdiff_t>(recorded) || at->step != (*sums)[i].step)
                out.push_back(summed_breakdown(d.meta, (*sums)[i].step, sums->data() + i, sums->data() + j));
            i = j;
        }
        std::inplace_merge(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(recorded), out.end(), by_step);
    }
    return out;
}

}  // namespace fp8scope::views
