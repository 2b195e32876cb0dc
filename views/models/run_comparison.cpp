// Comparing two runs.
#include "models/run_comparison.h"

namespace fp8scope::views {

int default_compare_run(const trace::TraceMeta& meta, int run) {
    const int base = trace::baseline_of(meta);
    return base >= 0 && base != run && base < static_cast<int>(meta.runs.size()) ? base : -1;
}

std::pair<std::int64_t, std::int64_t> compared_numel(const TraceData& d, int run, int other, const OperandRef& ref,
                                                     std::int64_t step) {
    auto numel = [&](int r) -> std::int64_t {
        if (r < 0 || r >= static_cast<int>(d.runs.size())) return 0;
        const OperandSummary* o = d.runs[r].operand_at(step, ref);
        return o ? static_cast<std::int64_t>(o->figures[&TensorStats::numel]) : 0;
    };
    return {numel(run), numel(other)};
}

QString shapes_differ_note(const TraceData& d, int run, int other, const OperandRef& ref, std::int64_t step) {
    const auto [a, b] = compared_numel(d, run, other, ref, step);
    if (a == 0 || b == 0 || a == b) return {};
    return QObject::tr("shapes differ: %1 elements here, %2 in the other run (another model or batch): "
                       "not the same tensor, no difference")
        .arg(a)
        .arg(b);
}

SlotSeries slot_series(const RunData& rd, int slot) {
    SlotSeries s;
    const std::vector<trace::SlotPoint> points = rd.scaling.points(slot);
    const auto n = static_cast<qsizetype>(points.size());
    s.step.reserve(n);
    s.amax.reserve(n);
    s.scale.reserve(n);
    for (const trace::SlotPoint& p : points) {
        s.step << static_cast<double>(p.step);
        s.amax << p.amax;
        s.scale << p.scale;
    }
    return s;
}

}  // namespace fp8scope::views
