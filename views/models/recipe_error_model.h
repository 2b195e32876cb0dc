// Quantization error of one GEMM operand kind, per linear layer (rows) and analysis
// quantizer (columns), at the newest capture step at or before the cursor: the table behind
// the error view's heatmap. With a reference quantizer set, the values are each quantizer's
// statistic minus the reference's on the same layer (the ~1 dB differences that matter).
// A delayed quantizer's what-if on a layer that does not train with it is not applicable
// (quantizer_facts.h: scale 1, no history): its cells hold no value.
//
// Another run can be compared: the table then holds that run's figures, or the selected
// run's minus the other's on the same layer and quantizer, both at the newest capture step
// both runs have. A layer whose operand has other
// element counts in the two runs (one name in two models) has no difference.
#pragma once

#include <QAbstractTableModel>

#include "models/selection.h"
#include "models/series_store.h"

namespace fp8scope::views {

class RecipeErrorModel : public QAbstractTableModel {
    Q_OBJECT
public:
    explicit RecipeErrorModel(const SeriesStore* store, QObject* parent = nullptr);
    // What the cells hold when another run is compared.
    enum class RunCompare { Off, OtherRun, Difference };
    // The figures of `gemm` `operand` of every linear of `run`; with `other` >= 0 and
    // `compare` not Off, `other`'s figures or the difference run minus other.
    void refresh(int run, std::int64_t step, Gemm gemm, Operand operand, ErrorStat stat, int other = -1,
                 RunCompare compare = RunCompare::Off);
    RunCompare runCompare() const { return compare_; }
    int otherRun() const { return other_; }
    // What the cells hold when runs are compared: the other run's name or "run - other".
    const QString& compareLabel() const { return compare_label_; }

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
    // Why the compared runs' figures of a layer are not one tensor's; empty when they are.
    QString shapeNote(int row) const;
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
    QStringList shape_notes_;     // per linear: why the two runs' figures do not compare
    QString compare_label_;       // the compared run ("b") or difference ("a - b") the cells hold
    int reference_ = -1;
    int other_ = -1;
    RunCompare compare_ = RunCompare::Off;
};

}  // namespace fp8scope::views
