// Run against run, per op.
#include "models/op_time_comparison.h"

#include <algorithm>

#include "models/display_names.h"
#include "models/op_kernel_time.h"

namespace fp8scope::views {

namespace {

QString op_row_label(const trace::TraceMeta& meta, const OpTimeKey& k) {
    QString s = k.op < 0 ? QObject::tr("no op") : op_label(meta, k.op);
    if (k.linear >= 0) s = linear_label(meta, k.linear) + " " + s;
    if (k.operand >= 0 && k.operand < 3) s += " " + operand_label(static_cast<Operand>(k.operand));
    return s;
}

}  // namespace

std::vector<OpTimeRow> op_time_comparison(const TraceData& d, int a, int b, std::int64_t step) {
    const int runs = static_cast<int>(d.runs.size());
    if (a < 0 || b < 0 || a >= runs || b >= runs) return {};
    const OpTimes ta = op_kernel_time(d, a, step), tb = op_kernel_time(d, b, step);
    std::map<OpTimeKey, OpTimeRow> by_key;
    for (const auto& [k, ns] : ta) by_key[k].a_us = ns * 1e-3;
    for (const auto& [k, ns] : tb) by_key[k].b_us = ns * 1e-3;
    std::vector<OpTimeRow> rows;
    OpTimeRow total{QObject::tr("total"), 0, 0};
    for (auto& [k, r] : by_key) {
        r.op = op_row_label(d.meta, k);
        total.a_us += r.a_us;
        total.b_us += r.b_us;
        rows.push_back(r);
    }
    std::stable_sort(rows.begin(), rows.end(), [](const OpTimeRow& x, const OpTimeRow& y) { return x.saved_us() > y.saved_us(); });
    if (!rows.empty()) rows.insert(rows.begin(), total);
    return rows;
}

OpTimeComparisonModel::OpTimeComparisonModel(const SeriesStore* store, QObject* parent)
    : QAbstractTableModel(parent), store_(store) {}

void OpTimeComparisonModel::refresh(int a, int b, std::int64_t step) {
    beginResetModel();
    store_->read([&](const TraceData& d) {
        rows_ = op_time_comparison(d, a, b, step);
        name_a_ = run_label(d.meta, a);
        name_b_ = run_label(d.meta, b);
    });
    endResetModel();
}

int OpTimeComparisonModel::rowCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : static_cast<int>(rows_.size());
}
int OpTimeComparisonModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : kColumns; }

QVariant OpTimeComparisonModel::data(const QModelIndex& index, int role) const {
    if (!index.isValid() || index.row() >= static_cast<int>(rows_.size())) return {};
    const OpTimeRow& r = rows_[static_cast<std::size_t>(index.row())];
    const double v[] = {0, r.a_us, r.b_us, r.saved_us(), r.saved_pct()};
    if (role == Qt::UserRole) return index.column() == Op ? QVariant(r.op) : QVariant(v[index.column()]);
    if (role == Qt::TextAlignmentRole && index.column() != Op) return int(Qt::AlignRight | Qt::AlignVCenter);
    if (role != Qt::DisplayRole) return {};
    if (index.column() == Op) return r.op;
    if (index.column() == SavedPct) return r.a_us > 0 ? QString::number(v[SavedPct], 'f', 1) : QStringLiteral("—");
    return QString::number(v[index.column()], 'f', 1);
}

QVariant OpTimeComparisonModel::headerData(int section, Qt::Orientation o, int role) const {
    if (o != Qt::Horizontal || role != Qt::DisplayRole) return {};
    switch (section) {
        case Op: return tr("op");
        case TimeA: return tr("%1 µs").arg(name_a_);
        case TimeB: return tr("%1 µs").arg(name_b_);
        case Saved: return tr("saved µs");
        case SavedPct: return tr("saved %");
        default: return {};
    }
}

}  // namespace fp8scope::views
