// Steps with individual kernel records.
#include "models/kernel_detail.h"

#include <QCoreApplication>

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
    const QString overview =
        rd.kernel_steps_decimated.empty()
            ? QString()
            : tr("; a large trace: statistics from the %1 steps read whole (%2: the newest and those a zoom shows), "
                 "the step costs of the others decimated (each bucket's cheapest, dearest and first step)")
                  .arg(summed.size())
                  .arg(step_ranges(summed, 4));
    const std::vector<std::int64_t> detailed = detailed_steps(rd);
    if (detailed.size() >= summed.size()) return overview.isEmpty() ? QString() : overview.mid(2);
    QString mode;
    if (!d.meta.kernel_timings.empty())
        mode = tr(" (--kernel-timings %1, window %2)").arg(QString::fromStdString(d.meta.kernel_timings)).arg(d.meta.kernel_window);
    const QString where = detailed.empty() ? tr("no individual kernels recorded") + mode
                                           : tr("individual kernels recorded on steps %1").arg(step_ranges(detailed)) + mode;
    if (!overview.isEmpty()) return where + overview;
    return where + tr("; statistics from every step (%1 steps with kernel sums)").arg(summed.size());
}

}  // namespace fp8scope::views
