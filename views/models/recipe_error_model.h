// Quantization error of one GEMM operand kind, per linear layer (rows) and analysis
// quantizer (columns), at the newest capture step at or before the cursor: the table behind
// the error view's heatmap. With a reference quantizer set, the values are each quantizer's
// statistic minus the reference's on the same layer (the ~1 dB differences that matter).
// A delayed quantizer's what-if on a layer that does not train with it is not applicable
// (quantizer_facts.h: scale 1, no history): its cells hold no value.
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

    // The reference quantizer whose value is subtracted; -1: none (plain values).
    void setReference(int recipe);
    int reference() const { return reference_; }
    // "current_e4m3" (per-tensor current scaling), else the first current_* quantizer; -1.
    static int defaultReference(const QStringList& recipes);

    double value(int row, int recipe) const;     // minus the reference's; NaN when not captured or not applicable
    double rawValue(int row, int recipe) const;  // the statistic itself
    // False for a captured what-if that describes no cast of the run (see above).
    bool applies(int row, int recipe) const;
    // Why a cell that does not apply has no value; empty when it applies.
    QString voidReason(int row, int recipe) const;
    // The analysis quantizer the layer trains with (outlined in the heatmap); -1 when none.
    int recipeInUse(int row) const;
    QString linearName(int row) const { return linears_.value(row); }
    int recipeCount() const { return static_cast<int>(recipes_.size()); }
    QString recipeName(int recipe) const { return recipes_.value(recipe); }
    const QStringList& recipeNames() const { return recipes_; }

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;  // linear + one per recipe
    QVariant data(const QModelIndex& index, int role) const override;
    QVariant headerData(int section, Qt::Orientation o, int role) const override;

private:
    const SeriesStore* store_;
    QStringList linears_, recipes_;
    std::vector<double> values_;  // (linears, recipes)
    std::vector<char> applies_;   // (linears, recipes)
    std::vector<int> in_use_;     // per linear
    int reference_ = -1;
};

}  // namespace fp8scope::views
