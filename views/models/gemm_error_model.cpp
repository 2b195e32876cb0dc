// Per-layer, per-GEMM output error table (gemm_error_model.h).
#include "models/gemm_error_model.h"

#include <cmath>

#include "models/display_names.h"
#include "models/model_roles.h"

namespace fp8scope::views {

namespace {
constexpr int kGemms = 3;
}

const char* output_stat_name(OutputStat s) { return s == OutputStat::Sqnr ? "output SQNR" : "output rel. error"; }

double output_stat_value(const trace::GemmErrorRecord& r, OutputStat s) {
    return s == OutputStat::Sqnr ? r.sqnr_db : r.rel_err;
}

const trace::GemmErrorRecord* gemm_error_at(const RunData& run, std::int64_t step, int linear, Gemm gemm) {
    const trace::GemmErrorRecord* found = nullptr;
    for (auto it = run.gemm_errors.rbegin(); it != run.gemm_errors.rend(); ++it) {
        if (it->step > step) continue;
        if (found && it->step < found->step) break;  // past the newest step that has it
        if (it->linear == linear && it->gemm == gemm && !found) found = &*it;
    }
    return found;
}

GemmErrorModel::GemmErrorModel(const SeriesStore* store, QObject* parent) : QAbstractTableModel(parent), store_(store) {}

void GemmErrorModel::refresh(int run, std::int64_t step, OutputStat stat) {
    QStringList linears;
    std::vector<double> values;
    std::vector<std::int64_t> steps;
    store_->read([&](const TraceData& d) {
        const int nl = static_cast<int>(d.meta.linears.size());
        values.assign(static_cast<std::size_t>(nl) * kGemms, NAN);
        steps.assign(values.size(), -1);
        for (int l = 0; l < nl; ++l) linears << linear_label(d.meta, l);
        if (run < 0 || run >= static_cast<int>(d.runs.size())) return 0;
        for (int l = 0; l < nl; ++l)
            for (int g = 0; g < kGemms; ++g)
                if (const auto* r = gemm_error_at(d.runs[run], step, l, Gemm(g))) {
                    values[static_cast<std::size_t>(l) * kGemms + g] = output_stat_value(*r, stat);
                    steps[static_cast<std::size_t>(l) * kGemms + g] = r->step;
                }
        return 0;
    });
    beginResetModel();
    linears_ = std::move(linears);
    values_ = std::move(values);
    steps_ = std::move(steps);
    stat_ = stat;
    endResetModel();
}

double GemmErrorModel::value(int row, int gemm) const {
    if (row < 0 || row >= rowCount() || gemm < 0 || gemm >= kGemms) return NAN;
    return values_[static_cast<std::size_t>(row) * kGemms + gemm];
}

std::int64_t GemmErrorModel::step(int row, int gemm) const {
    if (row < 0 || row >= rowCount() || gemm < 0 || gemm >= kGemms) return -1;
    return steps_[static_cast<std::size_t>(row) * kGemms + gemm];
}

int GemmErrorModel::rowCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : static_cast<int>(linears_.size());
}
int GemmErrorModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : 1 + kGemms; }

QVariant GemmErrorModel::data(const QModelIndex& index, int role) const {
    if (!checkIndex(index, CheckIndexOption::IndexIsValid)) return {};
    if (index.column() == 0)
        return role == Qt::DisplayRole || role == kValueRole ? QVariant(linears_[index.row()]) : QVariant();
    const double v = value(index.row(), index.column() - 1);
    if (role == Qt::DisplayRole) return format_figure(v);
    if (role == kValueRole) return v;
    if (role == Qt::TextAlignmentRole) return int(Qt::AlignRight | Qt::AlignVCenter);
    return {};
}

QVariant GemmErrorModel::headerData(int section, Qt::Orientation o, int role) const {
    if (o != Qt::Horizontal || role != Qt::DisplayRole) return {};
    if (section == 0) return QStringLiteral("linear");
    if (section > kGemms) return {};
    return QStringLiteral("%1 %2").arg(gemm_label(Gemm(section - 1)), QString::fromLatin1(output_stat_name(stat_)));
}

}  // namespace fp8scope::views
