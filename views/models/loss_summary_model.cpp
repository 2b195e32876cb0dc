// Loss summary table.
#include "models/loss_summary_model.h"

#include "models/display_names.h"
#include "models/model_roles.h"
#include "run_seeds.h"

namespace fp8scope::views {

int baseline_run(const trace::TraceMeta& meta) {
    const int base = trace::baseline_of(meta);
    return base >= 0 ? base : meta.runs.empty() ? -1 : 0;
}

double relative_pct(double x, double base) {
    return std::isfinite(x) && std::isfinite(base) && base != 0 ? 100.0 * (x - base) / base : NAN;
}

namespace {
double last_finite(const std::vector<double>& v) {
    for (auto it = v.rbegin(); it != v.rend(); ++it)
        if (std::isfinite(*it)) return *it;
    return NAN;
}
}  // namespace

LossSummaryModel::LossSummaryModel(const SeriesStore* store, QObject* parent)
    : QAbstractTableModel(parent), store_(store) {}

void LossSummaryModel::refresh() {
    std::vector<Row> rows = store_->read([](const TraceData& d) {
        std::vector<Row> out;
        for (std::size_t r = 0; r < d.runs.size(); ++r) {
            const StepColumns& c = d.runs[r].steps;
            out.push_back({run_label(d.meta, static_cast<int>(r)), c.size() ? c.step.back() : NAN,
                           last_finite(c[&trace::StepRecord::loss]), last_finite(c[&trace::StepRecord::eval_loss])});
        }
        const int base = baseline_run(d.meta);
        // Several seeds: each run against the baseline run of its seed.
        const int seeds = trace::run_seeds(d.meta).per_recipe;
        if (base >= 0 && base + seeds <= static_cast<int>(out.size()))
            for (int r = 0; r < static_cast<int>(out.size()); ++r)
                if (const int b = base + r % seeds; r != b) {
                    out[r].loss_pct = relative_pct(out[r].loss, out[b].loss);
                    out[r].eval_pct = relative_pct(out[r].eval_loss, out[b].eval_loss);
                }
        return out;
    });
    const bool same = rows.size() == rows_.size();
    if (!same) beginResetModel();
    rows_ = std::move(rows);
    if (!same) endResetModel();
    else if (!rows_.empty()) emit dataChanged(index(0, 0), index(rowCount() - 1, ColumnCount - 1));
}

double LossSummaryModel::value(int row, int column) const {
    if (row < 0 || row >= rowCount()) return NAN;
    const Row& r = rows_[row];
    switch (column) {
        case LastStep: return r.last_step;
        case Loss: return r.loss;
        case LossVsBaseline: return r.loss_pct;
        case EvalLoss: return r.eval_loss;
        case EvalVsBaseline: return r.eval_pct;
        default: return NAN;
    }
}

int LossSummaryModel::rowCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : static_cast<int>(rows_.size());
}
int LossSummaryModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : ColumnCount; }

QVariant LossSummaryModel::data(const QModelIndex& index, int role) const {
    if (!checkIndex(index, CheckIndexOption::IndexIsValid)) return {};
    const int c = index.column();
    if (c == Run) return role == Qt::DisplayRole || role == kValueRole ? QVariant(rows_[index.row()].run) : QVariant();
    const double v = value(index.row(), c);
    if (role == kValueRole) return v;
    if (role == Qt::TextAlignmentRole) return int(Qt::AlignRight | Qt::AlignVCenter);
    if (role != Qt::DisplayRole) return {};
    if (c == LossVsBaseline || c == EvalVsBaseline)
        return std::isfinite(v) ? QStringLiteral("%1%2%").arg(v >= 0 ? "+" : "").arg(v, 0, 'f', 2) : QString();
    return c == LastStep ? (std::isfinite(v) ? QString::number(static_cast<qint64>(v)) : QString()) : format_figure(v);
}

QVariant LossSummaryModel::headerData(int section, Qt::Orientation o, int role) const {
    if (o != Qt::Horizontal || role != Qt::DisplayRole) return {};
    static const char* names[ColumnCount] = {"run", "last step", "loss", "loss vs baseline", "eval loss",
                                             "eval vs baseline"};
    return section >= 0 && section < ColumnCount ? QString::fromLatin1(names[section]) : QVariant();
}

}  // namespace fp8scope::views
