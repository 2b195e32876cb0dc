// Per-kernel statistics of a step.
#include "models/kernel_stats_model.h"

#include <algorithm>
#include <map>

#include "models/display_names.h"
#include "models/model_roles.h"

namespace fp8scope::views {

KernelStatsModel::KernelStatsModel(const SeriesStore* store, QObject* parent)
    : QAbstractTableModel(parent), store_(store) {}

void KernelStatsModel::refresh(int run, std::int64_t step) {
    double step_s = 0;
    std::vector<Row> rows = store_->read([&](const TraceData& d) {
        std::vector<Row> out;
        if (run < 0 || run >= static_cast<int>(d.runs.size())) return out;
        const RunData& rd = d.runs[run];
        auto [lo, hi] = rd.ops_of_step(step);
        std::map<int, Row> by_op;
        std::int64_t t0 = INT64_MAX, t1 = INT64_MIN;
        for (std::size_t i = lo; i < hi; ++i) {
            const auto& op = rd.ops[i];
            Row& r = by_op[op.op];
            r.calls += 1;
            r.total_ns += static_cast<double>(op.end_ns - op.start_ns);
            t0 = std::min(t0, op.start_ns);
            t1 = std::max(t1, op.end_ns);
        }
        for (auto& [id, r] : by_op) {
            r.name = op_label(d.meta, id);
            out.push_back(r);
        }
        std::sort(out.begin(), out.end(), [](const Row& a, const Row& b) { return a.total_ns > b.total_ns; });
        const auto row = rd.step_row_at(step);
        if (row >= 0 && rd.steps.step[row] == static_cast<double>(step) && rd.steps.step_time_s[row] > 0)
            step_s = rd.steps.step_time_s[row];
        else if (hi > lo)
            step_s = static_cast<double>(t1 - t0) * 1e-9;
        return out;
    });
    beginResetModel();
    rows_ = std::move(rows);
    step_s_ = step_s;
    endResetModel();
}

int KernelStatsModel::rowCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : static_cast<int>(rows_.size());
}
int KernelStatsModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : ColumnCount; }

double KernelStatsModel::value(const Row& r, int column) const {
    switch (column) {
        case Calls: return static_cast<double>(r.calls);
        case TotalMs: return r.total_ns * 1e-6;
        case MeanUs: return r.calls ? r.total_ns * 1e-3 / static_cast<double>(r.calls) : NAN;
        case SharePct: return step_s_ > 0 ? 100.0 * r.total_ns * 1e-9 / step_s_ : NAN;
        default: return NAN;
    }
}

QVariant KernelStatsModel::data(const QModelIndex& index, int role) const {
    if (!checkIndex(index, CheckIndexOption::IndexIsValid)) return {};
    const Row& r = rows_[index.row()];
    const int c = index.column();
    if (role == Qt::DisplayRole || role == Qt::ToolTipRole) {
        if (c == Name) return r.name;
        if (c == Calls) return r.calls;
        return format_figure(value(r, c));
    }
    if (role == kValueRole) return c == Name ? QVariant(r.name) : QVariant(value(r, c));
    if (role == Qt::TextAlignmentRole && c != Name) return int(Qt::AlignRight | Qt::AlignVCenter);
    return {};
}

QVariant KernelStatsModel::headerData(int section, Qt::Orientation o, int role) const {
    if (o != Qt::Horizontal || role != Qt::DisplayRole) return {};
    static const char* names[ColumnCount] = {"op / kernel", "calls", "total ms", "mean us", "share of step %"};
    return section >= 0 && section < ColumnCount ? QString::fromLatin1(names[section]) : QVariant();
}

}  // namespace fp8scope::views
