// Per-layer, per-quantizer error table.
#include "models/recipe_error_model.h"

#include <cmath>

#include "models/display_names.h"
#include "models/model_roles.h"
#include "models/quantizer_facts.h"
#include "models/run_comparison.h"

namespace fp8scope::views {

RecipeErrorModel::RecipeErrorModel(const SeriesStore* store, QObject* parent)
    : QAbstractTableModel(parent), store_(store) {}

namespace {

// One run's figures of one operand kind: (linears, quantizers) values and applicability,
// and each linear's quantizer in use.
struct RunFigures {
    std::vector<double> values;
    std::vector<char> applies;
    std::vector<int> in_use;
};

RunFigures run_figures(const TraceData& d, int run, std::int64_t step, Gemm gemm, Operand operand, ErrorStat stat) {
    const std::size_t nq = d.meta.quantizers.size();
    const int nl = static_cast<int>(d.meta.linears.size());
    RunFigures f{std::vector<double>(static_cast<std::size_t>(nl) * nq, NAN), std::vector<char>(static_cast<std::size_t>(nl) * nq, 1),
                 std::vector<int>(static_cast<std::size_t>(nl), -1)};
    if (run < 0 || run >= static_cast<int>(d.runs.size())) return f;
    const RunData& rd = d.runs[run];
    const auto cap = rd.capture_index_at(step);
    for (int l = 0; l < nl; ++l) {
        const OperandSummary* o = rd.operand(cap, {l, gemm, operand});
        if (!o) continue;
        f.in_use[l] = o->recipe_in_use >= 0 && o->recipe_in_use < static_cast<int>(nq) ? o->recipe_in_use : -1;
        const auto errors = o->errors();
        for (std::size_t r = 0; r < nq && r < errors.size(); ++r) {
            const std::size_t i = static_cast<std::size_t>(l) * nq + r;
            f.applies[i] = what_if_applies(d.meta.quantizers[r], static_cast<int>(r) == o->recipe_in_use);
            f.values[i] = f.applies[i] ? error_stat_value(errors[r], stat) : NAN;
        }
    }
    return f;
}

}  // namespace

void RecipeErrorModel::refresh(int run, std::int64_t step, Gemm gemm, Operand operand, ErrorStat stat, int other,
                               RunCompare compare) {
    if (other < 0) compare = RunCompare::Off;
    QStringList linears, recipes, notes;
    QString label;
    RunFigures f;
    store_->read([&](const TraceData& d) {
        recipes = quantizer_labels(d.meta);
        const int nl = static_cast<int>(d.meta.linears.size());
        for (int l = 0; l < nl; ++l) {
            linears << linear_label(d.meta, l);
            notes << (compare == RunCompare::Off ? QString() : shapes_differ_note(d, run, other, {l, gemm, operand}, step));
        }
        label = compare == RunCompare::Off        ? QString()
                : compare == RunCompare::OtherRun ? run_label(d.meta, other)
                                                  : QStringLiteral("%1 - %2").arg(run_label(d.meta, run), run_label(d.meta, other));
        f = run_figures(d, compare == RunCompare::OtherRun ? other : run, step, gemm, operand, stat);
        if (compare != RunCompare::Difference) return 0;
        // Both at the newest capture step both have: another trace may capture on another cadence.
        const std::int64_t common = run >= 0 && run < static_cast<int>(d.runs.size()) && other < static_cast<int>(d.runs.size())
                                        ? newest_common_step(d.runs[run].capture_steps, d.runs[other].capture_steps, step)
                                        : -1;
        f = run_figures(d, run, common, gemm, operand, stat);
        const RunFigures o = run_figures(d, other, common, gemm, operand, stat);
        for (std::size_t i = 0; i < f.values.size(); ++i) {
            f.applies[i] = f.applies[i] && o.applies[i] && notes[static_cast<int>(i / recipes.size())].isEmpty();
            f.values[i] = f.applies[i] ? f.values[i] - o.values[i] : NAN;
        }
        return 0;
    });
    std::vector<double> values = std::move(f.values);
    std::vector<char> applies = std::move(f.applies);
    std::vector<int> in_use = std::move(f.in_use);
    other_ = compare == RunCompare::Off ? -1 : other;
    compare_ = compare;
    shape_notes_ = std::move(notes);
    compare_label_ = std::move(label);
    const bool same_shape = linears == linears_ && recipes == recipes_;
    if (!same_shape) beginResetModel();
    linears_ = std::move(linears);
    recipes_ = std::move(recipes);
    values_ = std::move(values);
    in_use_ = std::move(in_use);
    applies_ = std::move(applies);
    if (!same_shape) endResetModel();
    else if (rowCount() > 0) emit dataChanged(index(0, 0), index(rowCount() - 1, columnCount() - 1));
    if (same_shape) emit headerDataChanged(Qt::Horizontal, 1, recipeCount());
}

void RecipeErrorModel::setReference(int recipe) {
    if (recipe == reference_) return;
    reference_ = recipe;
    if (rowCount() > 0) emit dataChanged(index(0, 1), index(rowCount() - 1, columnCount() - 1));
    emit headerDataChanged(Qt::Horizontal, 1, recipeCount());
}

int RecipeErrorModel::defaultReference(const QStringList& recipes) {
    if (const auto i = recipes.indexOf("current_e4m3"); i >= 0) return static_cast<int>(i);
    for (int i = 0; i < recipes.size(); ++i)
        if (recipes[i].startsWith("current_")) return i;
    return -1;
}

double RecipeErrorModel::rawValue(int row, int recipe) const {
    if (row < 0 || row >= rowCount() || recipe < 0 || recipe >= recipeCount()) return NAN;
    return values_[static_cast<std::size_t>(row) * recipes_.size() + recipe];
}

double RecipeErrorModel::value(int row, int recipe) const {
    const double v = rawValue(row, recipe);
    return reference_ < 0 ? v : v - rawValue(row, reference_);
}

bool RecipeErrorModel::applies(int row, int recipe) const {
    if (row < 0 || row >= rowCount() || recipe < 0 || recipe >= recipeCount()) return true;
    return applies_[static_cast<std::size_t>(row) * recipes_.size() + recipe];
}

QString RecipeErrorModel::voidReason(int row, int recipe) const {
    if (applies(row, recipe)) return {};
    const QString shapes = shape_notes_.value(row);
    return !shapes.isEmpty() && compare_ == RunCompare::Difference ? shapes : what_if_void_reason(recipes_[recipe].toStdString());
}

QString RecipeErrorModel::shapeNote(int row) const { return shape_notes_.value(row); }

int RecipeErrorModel::recipeInUse(int row) const {
    return row >= 0 && row < static_cast<int>(in_use_.size()) ? in_use_[row] : -1;
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
    const bool applies = this->applies(index.row(), index.column() - 1);
    if (role == Qt::DisplayRole) return applies ? format_figure(v) : tr("n/a");
    if (role == Qt::ToolTipRole && !applies) return voidReason(index.row(), index.column() - 1);
    if (role == kValueRole) return v;
    if (role == Qt::TextAlignmentRole) return int(Qt::AlignRight | Qt::AlignVCenter);
    return {};
}

QVariant RecipeErrorModel::headerData(int section, Qt::Orientation o, int role) const {
    if (o != Qt::Horizontal || role != Qt::DisplayRole) return {};
    if (section == 0) return QStringLiteral("linear");
    if (section <= 0 || section > recipeCount()) return {};
    if (compare_ != RunCompare::Off) return QStringLiteral("%1 (%2)").arg(recipes_[section - 1], compare_label_);
    return reference_ < 0 ? recipes_[section - 1] : QStringLiteral("%1 - %2").arg(recipes_[section - 1], recipes_.value(reference_));
}

}  // namespace fp8scope::views
