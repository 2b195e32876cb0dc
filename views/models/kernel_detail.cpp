// Steps with individual kernel records.
#include "models/kernel_detail.h"

#include <QCoreApplication>
#include <algorithm>
#include <iterator>

namespace fp8scope::views {

bool has_kernel_records(const RunData& rd, std::int64_t step) {
    const auto [lo, hi] = rd.ops_of_step(step);
    for (auto i = lo; i < hi; ++i)
        if (rd.ops.device(i)) return true;
    return false;
}

std::vector<std::int64_t> detailed_steps(const RunData& rd) {
    std::vector<std::int64_t> out;
    for (std::size_t i = 0; i < rd.ops.size(); ++i) {
        const std::int64_t s = rd.ops.step(i);
        if ((out.empty() || out.back() != s) && rd.ops.device(i)) out.push_back(s);
    }
    return out;
}

std::vector<std::int64_t> recorded_steps(const RunData& rd) {
    std::vector<std::int64_t> out = detailed_steps(rd);
    if (!rd.kernel_record_steps) return out;
    std::vector<std::int64_t> both;  // a growing file's newest steps are in `ops` alone
    std::set_union(out.begin(), out.end(), rd.kernel_record_steps->begin(), rd.kernel_record_steps->end(),
                   std::back_inserter(both));
    return both;
}

bool detailed_steps_known(const TraceData& d, const RunData& rd) {
    return d.detail_from == INT64_MIN || rd.kernel_record_steps.has_value();
}

std::optional<std::pair<std::int64_t, std::int64_t>> kernel_records_wanted(const TraceData& d, std::int64_t first,
                                                                           std::int64_t last) {
    if (d.detail_from == INT64_MIN || first >= d.detail_from) return std::nullopt;
    last = std::min(last, d.detail_from - 1);
    if (first > last) return std::nullopt;
    // Covered by the windows read: walk them in step order.
    auto windows = d.op_windows;
    std::sort(windows.begin(), windows.end());
    std::int64_t from = first;
    for (const auto& [lo, hi] : windows) {
        if (lo > from) break;
        if (hi >= from) from = hi + 1;
        if (from > last) return std::nullopt;
    }
    return std::pair(first, last);
}

namespace {
// Whether the run has kernel sums (of an overview: read whole or decimated).
bool has_kernel_sums(const RunData& rd) { return !rd.kernel_steps.empty() || !rd.kernel_steps_decimated.empty(); }

// An overview's step before its newest whose sums `rd` lacks: decimated away, or never written.
bool sums_left_out(const TraceData& d, const RunData& rd, std::int64_t step) {
    return d.detail_from != INT64_MIN && step < d.detail_from && has_kernel_sums(rd) && rd.step_sums(step).empty();
}
}  // namespace

bool kernel_sums_wanted(const TraceData& d, std::int64_t step) {
    if (d.kernel_sums_at == step) return false;
    return std::any_of(d.runs.begin(), d.runs.end(), [&](const RunData& rd) { return sums_left_out(d, rd, step); });
}

QString kernel_sums_note(const TraceData& d, int run, std::int64_t step) {
    if (run < 0 || run >= static_cast<int>(d.runs.size()) || !sums_left_out(d, d.runs[static_cast<std::size_t>(run)], step))
        return {};
    const auto tr = [](const char* s) { return QCoreApplication::translate("KernelView", s); };
    if (d.kernel_sums_at != step)
        return tr("step %1: reading its kernel sums from the trace (a large trace holds them decimated before step %2)...")
            .arg(step)
            .arg(d.detail_from);
    return tr("step %1: the trace has no kernel sums of this step").arg(step);
}

QString timeline_note(const TraceData& d, int run, std::int64_t first, std::int64_t step) {
    if (run < 0 || run >= static_cast<int>(d.runs.size())) return {};
    const auto tr = [](const char* s) { return QCoreApplication::translate("KernelView", s); };
    if (const auto want = kernel_records_wanted(d, first, step))
        return want->first == want->second ? tr("step %1: reading its op and kernel records from the trace...").arg(want->first)
                                           : tr("steps %1-%2: reading their op and kernel records from the trace...")
                                                 .arg(want->first)
                                                 .arg(want->second);
    const RunData& rd = d.runs[static_cast<std::size_t>(run)];
    if (has_kernel_records(rd, step)) return {};
    const bool summed = !rd.step_sums(step).empty();
    // An overview's step before the newest may have its sums decimated away, not absent.
    const bool kernels = summed || sums_left_out(d, rd, step);
    if (!kernels) return {};
    const std::vector<std::int64_t> kept = recorded_steps(rd);
    const QString where = !detailed_steps_known(d, rd) ? tr("the steps that kept them are still being found")
                          : kept.empty()                ? tr("no step of the trace kept them")
                                                        : tr("kept on steps %1").arg(step_ranges(kept, 4));
    return (summed ? tr("step %1: kernel sums only, no individual kernel records (%2)")
                     : tr("step %1: no individual kernel records (%2)"))
        .arg(step)
        .arg(where);
}

QString step_ranges(const std::vector<std::int64_t>& steps, int max_ranges) {
    QStringList parts;
    std::size_t rest = 0;
    for (std::size_t i = 0; i < steps.size();) {
        std::size_t j = i;
        while (j + 1 < steps.size() && steps[j + 1] == steps[j] + 1) ++j;
        if (parts.size() < max_ranges)
            parts << (j == i ? QString::number(steps[i]) : QStringLiteral("%1-%2").arg(steps[i]).arg(steps[j]));
        else
            rest += j - i + 1;
        i = j + 1;
    }
    QString text = parts.join(QStringLiteral(", "));
    if (rest) text += QCoreApplication::translate("KernelView", ", and %1 more steps").arg(rest);
    return text;
}

QString kernel_detail_note(const TraceData& d, int run) {
    if (run < 0 || run >= static_cast<int>(d.runs.size())) return {};
    const RunData& rd = d.runs[static_cast<std::size_t>(run)];
    if (rd.kernel_steps.empty()) return {};
    std::vector<std::int64_t> summed;
    for (std::size_t i = 0; i < rd.kernel_steps.size(); ++i)
        if (i == 0 || rd.kernel_steps[i].step != rd.kernel_steps[i - 1].step) summed.push_back(rd.kernel_steps[i].step);
    const auto tr = [](const char* s) { return QCoreApplication::translate("KernelView", s); };
    // A large trace: the statistics cover only the steps read whole; say which.
    const bool cursor = d.kernel_sums_at < d.detail_from && std::binary_search(summed.begin(), summed.end(), d.kernel_sums_at);
    const QString overview =
        rd.kernel_steps_decimated.empty()
            ? QString()
            : tr("; a large trace: statistics from the %1 steps read whole (%2: the newest%3), "
                 "the step costs of the others decimated (each bucket's cheapest, dearest and first step)")
                  .arg(summed.size())
                  .arg(step_ranges(summed, 4))
                  .arg(cursor ? tr(", those a zoom shows and the cursor's") : tr(" and those a zoom shows"));
    const std::vector<std::int64_t> detailed = recorded_steps(rd);
    // Every step kept its records (of an overview: the file says which, the store holds few).
    if (overview.isEmpty() && detailed.size() >= summed.size()) return {};
    QString mode;
    if (!d.meta.kernel_timings.empty())
        mode = tr(" (--kernel-timings %1, window %2)").arg(QString::fromStdString(d.meta.kernel_timings)).arg(d.meta.kernel_window);
    const QString where = !detailed_steps_known(d, rd) ? tr("the steps with individual kernel records are still being found")
                          : detailed.empty()          ? tr("no individual kernels recorded") + mode
                                             : tr("individual kernels recorded on steps %1").arg(step_ranges(detailed)) + mode;
    if (!overview.isEmpty()) return where + overview;
    return where + tr("; statistics from every step (%1 steps with kernel sums)").arg(summed.size());
}

}  // namespace fp8scope::views
