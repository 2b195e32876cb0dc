// The seeds' gap table.
#include "models/seed_gap_model.h"

#include "models/display_names.h"
#include "models/model_roles.h"

namespace fp8scope::views {

std::vector<stats::RunLosses> run_losses(const TraceData& d) {
    using R = trace::StepRecord;
    std::vector<stats::RunLosses> out;
    for (const RunData& r : d.runs) out.push_back({r.steps.step, r.steps[&R::loss], r.steps[&R::eval_loss]});
    return out;
}

SeedGapModel::SeedGapModel(const SeriesStore* store, QObject* parent) : QAbstractTableModel(parent), store_(store) {}

void SeedGapModel::refresh() {
    beginResetModel();
    gaps_ = store_->read([](const TraceData& d) { return trace::seed_gaps(d.meta, run_losses(d)); });
    rows_.clear();
    if (gaps_)
        for (int g = 0; g < int(gaps_->recipes.size()); ++g)
            if (g != gaps_->comparison.baseline) rows_.push_back(g);
    endResetModel();
}

double SeedGapModel::value(int row, int column) const {
    const int g = recipe(row);
    if (g < 0) return NAN;
    const stats::GapCurve& curve = gaps_->comparison.gap[std::size_t(g)];
    const stats::PairedDifference d = curve.final();
    switch (column) {
        case MeanGap: return d.mean;
        case GapPct: return d.percent();
        case CiLow: return d.lo();
        case CiHigh: return d.hi();
        case Significant: return d.n >= 2 ? double(d.significant()) : NAN;
        case LeavesBand: return curve.first_outside().value_or(NAN);
        default: return NAN;
    }
}

int SeedGapModel::rowCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : int(rows_.size()); }
int SeedGapModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : ColumnCount; }

QVariant SeedGapModel::data(const QModelIndex& index, int role) const {
    if (!checkIndex(index, CheckIndexOption::IndexIsValid)) return {};
    const int c = index.column();
    if (c == Recipe)
        return role == Qt::DisplayRole || role == kValueRole
                   ? QVariant(QString::fromStdString(gaps_->recipes[std::size_t(recipe(index.row()))]))
                   : QVariant();
    const double v = value(index.row(), c);
    if (role == kValueRole) return v;
    if (role == Qt::TextAlignmentRole) return int(Qt::AlignRight | Qt::AlignVCenter);
    if (role != Qt::DisplayRole) return {};
    if (!std::isfinite(v)) return c == LeavesBand ? QStringLiteral("-") : QString();
    switch (c) {
        case GapPct: return QStringLiteral("%1%2%").arg(v >= 0 ? "+" : "").arg(v, 0, 'f', 3);
        case Significant: return v > 0 ? tr("yes") : tr("no");
        case LeavesBand: return QString::number(static_cast<qint64>(v));
        default: return QStringLiteral("%1%2").arg(v >= 0 ? "+" : "").arg(v, 0, 'f', 5);
    }
}

QVariant SeedGapModel::headerData(int section, Qt::Orientation o, int role) const {
    if (o != Qt::Horizontal || role != Qt::DisplayRole) return {};
    static const char* names[ColumnCount] = {"recipe", "mean gap", "gap %", "CI low", "CI high",
                                             "significant", "leaves band"};
    return section >= 0 && section < ColumnCount ? QString::fromLatin1(names[section]) : QVariant();
}

}  // namespace fp8scope::views
