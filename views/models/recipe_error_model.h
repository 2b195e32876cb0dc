// Quantization error of one GEMM operand kind, per linear layer (rows) and analysis
// recipe (columns), at the newest capture step at or before the cursor: the table behind
// the error view's side-by-side bars.
#pragma once

#include <QAbstractTableModel>

#include "models/selection.h"
#include "models/series_store.h"

namespace fp8scope::views {

class RecipeErrorModel : public QAbstractTableModel {
    Q_OBJECT
public:
    explicit RecipeErrorModel(const SeriesStore* store, QObject* parent = nullptr);
    // The GEMM and operand of `ref` are used for every linear; its linear is ignored.
    void refresh(int run, std::int64_t step, Gemm gemm, Operand operand, ErrorStat stat);

    double value(int row, int recipe) const;  // NaN when not captured
    int recipeCount() const { return static_cast<int>(recipes_.size()); }
    QString recipeName(int recipe) const { return recipes_.value(recipe); }

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;  // linear + one per recipe
    QVariant data(const QModelIndex& index, int role) const override;
    QVariant headerData(int section, Qt::Orientation o, int role) const override;

private:
    const SeriesStore* store_;
    QStringList linears_, recipes_;
    std::vector<double> values_;  // (linears, recipes)
};

}  // namespace fp8scope::views
