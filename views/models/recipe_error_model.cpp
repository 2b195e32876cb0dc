// Per-layer, per-recipe error table.
#include "models/recipe_error_model.h"

#include <cmath>

#include "models/display_names.h"
#include "models/model_roles.h"

namespace fp8scope::views {

RecipeErrorModel::RecipeErrorModel(const SeriesStore* store, QObject* parent)
    : QAbstractTableModel(parent), store_(store) {}

void RecipeErrorModel::refresh(int run, std::int64_t step, Gemm gemm, Operand operand, ErrorStat stat) {
    QStringList linears, recipes;
    std::vector<double> values;
    store_->read([&](const TraceData& d) {
        for (std::size_t r = 0; r < d.meta.recipes.size(); ++r) recipes << recipe_label(d.meta, static_cast<int>(r));
        const int nl = static_cast<int>(d.meta.linears.size());
        values.assign(static_cast<std::size_t>(nl) * recipes.size(), NAN);
        for (int l = 0; l < nl; ++l) linears << linear_label(d.meta, l);
        if (run < 0 || run >= static_cast<int>(d.runs.size())) return 0;
        const RunData& rd = d.runs[run];
        const auto cap = rd.capture_index_at(step);
        for (int l = 0; l < nl; ++l) {
            const trace::OperandRecord* o = rd.operand(cap, {l, gemm, operand});
            if (!o) continue;
            for (int r = 0; r < recipes.size() && r < static_cast<int>(o->errors.size()); ++r)
                values[static_cast<std::size_t>(l) * recipes.size() + r] = error_stat_value(o->errors[r], stat);
        }
        return 0;
    });
    const bool same_shape = linears == linears_ && recipes == recipes_;
    if (!same_shape) beginResetModel();
    linears_ = std::move(linears);
    recipes_ = std::move(recipes);
    values_ = std::move(values);
    if (!same_shape) endResetModel();
    else if (rowCount() > 0) emit dataChanged(index(0, 0), index(rowCount() - 1, columnCount() - 1));
}

double RecipeErrorModel::value(int row, int recipe) const {
    if (row < 0 || row >= rowCount() || recipe < 0 || recipe >= recipeCount()) return NAN;
    return values_[static_cast<std::size_t>(row) * recipes_.size() + recipe];
}

int RecipeErrorModel::rowCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : static_cast<int>(linears_.size());
}
int RecipeErrorModel::columnCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : 1 + recipeCount();
}

QVariant RecipeErrorModel::data(const QModelIndex& index, int role) const {
    if (!checkIndex(index, CheckIndexOption::IndexIsValid)) return {};
    if (index.column() == 0)
        return role == Qt::DisplayRole || role == kValueRole ? QVariant(linears_[index.row()]) : QVariant();
    const double v = value(index.row(), index.column() - 1);
    if (role == Qt::DisplayRole) return format_figure(v);
    if (role == kValueRole) return v;
    if (role == Qt::TextAlignmentRole) return int(Qt::AlignRight | Qt::AlignVCenter);
    return {};
}

QVariant RecipeErrorModel::headerData(int section, Qt::Orientation o, int role) const {
    if (o != Qt::Horizontal || role != Qt::DisplayRole) return {};
    if (section == 0) return QStringLiteral("linear");
    return section > 0 && section <= recipeCount() ? QVariant(recipes_[section - 1]) : QVariant();
}

}  // namespace fp8scope::views
