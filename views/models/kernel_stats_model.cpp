// Per-kernel statistics of a step or a run.
#include "models/kernel_stats_model.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "models/display_names.h"
#include "models/model_roles.h"

namespace fp8scope::views {

double nearest_rank(std::vector<double>& v, double q) {
    if (v.empty()) return NAN;
    const auto rank = static_cast<std::size_t>(std::clamp(std::ceil(q * static_cast<double>(v.size())), 1.0,
                                                          static_cast<double>(v.size()))) - 1;
    std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(rank), v.end());
    return v[rank];
}

KernelStatsModel::KernelStatsModel(const SeriesStore* store, QObject* parent)
    : QAbstractTableModel(parent), store_(store) {}

void KernelStatsModel::refresh(int run, std::int64_t step, Scope scope, KernelSelection filter) {
    double step_s = 0;
    int steps = 0;
    bool device = false;
    std::vector<Row> rows = store_->read([&](const TraceData& d) {
        std::vector<Row> out;
        if (run < 0 || run >= static_cast<int>(d.runs.size())) return out;
        const RunData& rd = d.runs[run];
        auto [lo, hi] = scope == WholeRun ? std::pair<std::size_t, std::size_t>{0, rd.ops.size()} : rd.ops_of_step(step);
        for (std::size_t i = lo; i < hi && !device; ++i) device = is_device(rd.ops[i]);
        std::map<int, int> parent_of;  // kernel name id -> the host op it ran in (the first seen)
        std::map<int, std::vector<double>> durations;  // op id -> call times, ns
        // Each step's time: recorded, else the span of its ops.
        std::int64_t t0 = INT64_MAX, t1 = INT64_MIN, cur = INT64_MIN;
        const std::vector<double>& time_ms = rd.steps[&trace::StepRecord::step_ms];
        auto close_step = [&] {
            if (cur == INT64_MIN || device) return;  // device rows: step_s is device time
            ++steps;
            const auto row = rd.step_row_at(cur);
            if (row >= 0 && rd.steps.step[row] == static_cast<double>(cur) && time_ms[row] > 0)
                step_s += time_ms[row] * 1e-3;
            else
                step_s += static_cast<double>(t1 - t0) * 1e-9;
        };
        for (std::size_t i = lo; i < hi; ++i) {
            const auto& op = rd.ops[i];
            if (op.step != cur) {
                close_step();
                cur = op.step;
                t0 = INT64_MAX;
                t1 = INT64_MIN;
            }
            if (device) {
                if (!is_device(op)) continue;
                // Shares are of all device time in the scope, whatever the filter shows.
                const double ns = static_cast<double>(std::max<std::int64_t>(op.end_ns - op.start_ns, 0));
                step_s += ns * 1e-9;
                if (!filter.passes(d.meta, op)) continue;
                durations[op.op].push_back(ns);
                parent_of.emplace(op.op, op.parent);
                continue;
            }
            if (filter.passes(d.meta, op)) durations[op.op].push_back(static_cast<double>(op.end_ns - op.start_ns));
            t0 = std::min(t0, op.start_ns);
            t1 = std::max(t1, op.end_ns);
        }
        close_step();
        if (device) {  // close_step counts no steps then
            steps = 0;
            for (std::size_t i = lo; i < hi; ++i)
                if (i == lo || rd.ops.step(i) != rd.ops.step(i - 1)) ++steps;
        }
        for (auto& [id, t] : durations) {
            Row r;
            r.name = op_label(d.meta, id);
            if (device) {
                trace::OpRecord probe;
                probe.op = id;
                probe.device = 0;
                probe.parent = parent_of[id];
                r.parent = probe.parent >= 0 ? op_label(d.meta, probe.parent) : QString();
                const KernelKind k = kernel_kind(d.meta, probe);
                r.kind = kernel_kind_name(k);
                r.color = kernel_kind_color(k);
            }
            r.calls = static_cast<qint64>(t.size());
            for (double x : t) r.total_ns += x;
            r.max_ns = *std::max_element(t.begin(), t.end());
            r.median_ns = nearest_rank(t, 0.5);
            r.p95_ns = nearest_rank(t, 0.95);
            out.push_back(r);
        }
        std::sort(out.begin(), out.end(), [](const Row& a, const Row& b) { return a.total_ns > b.total_ns; });
        return out;
    });
    beginResetModel();
    rows_ = std::move(rows);
    step_s_ = step_s;
    steps_ = steps;
    device_ = device;
    endResetModel();
}

int KernelStatsModel::rowCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : static_cast<int>(rows_.size());
}
int KernelStatsModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : ColumnCount; }

double KernelStatsModel::value(int row, int column) const {
    if (row < 0 || row >= rowCount()) return NAN;
    const Row& r = rows_[row];
    switch (column) {
        case Calls: return static_cast<double>(r.calls);
        case TotalMs: return r.total_ns * 1e-6;
        case MeanUs: return r.calls ? r.total_ns * 1e-3 / static_cast<double>(r.calls) : NAN;
        case MedianUs: return r.median_ns * 1e-3;
        case P95Us: return r.p95_ns * 1e-3;
        case MaxUs: return r.max_ns * 1e-3;
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
        if (c == ParentOp) return r.parent;
        if (c == Kind) return r.kind;
        if (c == Calls) return r.calls;
        return format_figure(value(index.row(), c));
    }
    if (role == kValueRole) {
        if (c == Name) return r.name;
        if (c == ParentOp) return r.parent;
        if (c == Kind) return r.kind;
        return value(index.row(), c);
    }
    if (role == Qt::DecorationRole && c == Kind && !r.kind.isEmpty()) return r.color;
    if (role == Qt::TextAlignmentRole && c != Name && c != ParentOp && c != Kind) return int(Qt::AlignRight | Qt::AlignVCenter);
    return {};
}

QVariant KernelStatsModel::headerData(int section, Qt::Orientation o, int role) const {
    if (o != Qt::Horizontal || role != Qt::DisplayRole) return {};
    static const char* names[ColumnCount] = {"op / kernel", "calls", "total ms", "mean us", "median us",
                                             "p95 us", "max us", "share of time %", "in op", "kind"};
    // Device rows' shares are of the kernels' summed time, not of the step's wall time.
    if (section == SharePct && device_) return QStringLiteral("share of device time %");
    return section >= 0 && section < ColumnCount ? QString::fromLatin1(names[section]) : QVariant();
}

}  // namespace fp8scope::views
