// Quantization error view: for the selected GEMM operand kind, a heatmap of layers x
// analysis quantizer of the chosen statistic (sqnr, mse, underflow, overflow, cosine, ...)
// at the cursor, or of its difference to a reference quantizer (default: per-tensor current
// scaling), with each layer's quantizer in use outlined and the values on hover; below, the
// selected operand's statistic over capture steps, one line per quantizer. Colours follow
// the goodness scale (red worse, blue better, for every statistic); a delayed quantizer's
// what-if on a layer that does not train with it is hatched grey, with no value, out of
// the colour range and off the lines below (it would be a first step's, scale 1).
// The statistic combo also offers the error of each GEMM's output (output SQNR, output
// relative error): the heatmap then shows layers x GEMM (fprop, dgrad, wgrad) of the
// selected run at the cursor (models/gemm_error_model.h), titled with the most damaged
// GEMM, and the lines below the selected layer's three GEMMs over the capture steps; an
// operand cell's tooltip names the output error of its GEMM too.
// Another run (chosen beside, the baseline by default) can be compared: the heatmap then
// shows that run's figures, or the selected run's minus its figures on the same cell (a
// layer whose operand has another shape there is hatched: not the same tensor), and the
// lines below add the other run's, dashed.
#pragma once

#include "models/gemm_error_model.h"
#include "models/recipe_error_model.h"
#include "widgets/store_view.h"

class QCustomPlot;
class QComboBox;
class QCPColorMap;
class QCPItemStraightLine;

namespace fp8scope::views {

class CompareRunCombo;

class ErrorView : public StoreView {
    Q_OBJECT
public:
    explicit ErrorView(const ViewContext& ctx, QWidget* parent = nullptr);
    const QAbstractItemModel* table() const override { return &model_; }
    const RecipeErrorModel& model() const { return model_; }
    const GemmErrorModel& outputModel() const { return output_model_; }
    // The heatmap shows an output statistic (layers x GEMM) instead of operand errors.
    void showOutputStat(OutputStat stat);
    // The statistic whose name the box shows ("sqnr_db", "output SQNR"); false when none.
    bool showStatistic(const QString& name);
    bool showsOutput() const;
    QCustomPlot* heatmapPlot() const { return heat_; }
    QCPColorMap* heatmap() const { return map_; }
    QCustomPlot* stepsPlot() const { return steps_; }
    QColor recipeColor(int recipe) const { return colors_.value(recipe); }
    // What the heatmap shows: the mode combo's entries.
    enum Mode { QuantizerDifference, Values, OtherRunValues, RunDifference };
    void setMode(Mode mode);
    // "Difference to" on (the reference combo's quantizer) or off (plain values).
    void setDifferenceMode(bool on) { setMode(on ? QuantizerDifference : Values); }
    void setReference(int recipe);
    CompareRunCombo* compareRun() const { return compare_; }
    // The outlines of the quantizers in use: (quantizer, linear) cell of each (for tests).
    QVector<QPoint> outlinedCells() const;
    // The hatched cells of quantizers that do not apply: (quantizer, linear) (for tests).
    QVector<QPoint> voidCells() const;
    // The tooltip text for a cell.
    QString cellText(int linear, int recipe) const;

protected:
    void redraw() override;

private:
    void drawHeatmap();
    void drawOutputHeatmap(const TraceData& d, int run);
    QString outputStatLabel() const;
    // The selected layer's output statistic per GEMM over the capture steps.
    void drawOutputSteps(const TraceData& d);  // the colour scale's label, with its unit
    QString outputCellText(int linear, int gemm) const;
    void drawSteps(const TraceData& d);
    // One line per quantizer of `run`'s selected operand.
    void drawRunSteps(const TraceData& d, int run, Qt::PenStyle style);
    QVector<QPoint> cellsOf(const char* kind) const;
    RecipeErrorModel model_;
    GemmErrorModel output_model_;
    QComboBox *stat_, *mode_, *reference_;
    CompareRunCombo* compare_;
    QCustomPlot *heat_, *steps_;
    QCPColorMap* map_;
    QCPItemStraightLine* cursor_line_;
    QVector<QColor> colors_;  // per recipe, for the lines over steps
};

}  // namespace fp8scope::views
