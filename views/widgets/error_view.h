// Quantization error view: for the selected GEMM operand kind, the chosen statistic
// (sqnr, mse, underflow, overflow, cosine, ...) of every analysis recipe per layer, side
// by side at the cursor; below, the selected operand's statistic over capture steps, one
// line per recipe.
#pragma once

#include "models/recipe_error_model.h"
#include "widgets/store_view.h"

class QCustomPlot;
class QComboBox;
class QCPItemStraightLine;

namespace fp8scope::views {

class ErrorView : public StoreView {
    Q_OBJECT
public:
    explicit ErrorView(const ViewContext& ctx, QWidget* parent = nullptr);
    const QAbstractItemModel* table() const override { return &model_; }
    const RecipeErrorModel& model() const { return model_; }
    QCustomPlot* barsPlot() const { return bars_; }
    QCustomPlot* stepsPlot() const { return steps_; }
    QColor recipeColor(int recipe) const { return colors_.value(recipe); }

protected:
    void redraw() override;

private:
    void drawBars();
    void drawSteps(const TraceData& d);
    RecipeErrorModel model_;
    QComboBox* stat_;
    QCustomPlot *bars_, *steps_;
    QCPItemStraightLine* cursor_line_;
    QVector<QColor> colors_;  // per recipe, shared by both plots
};

}  // namespace fp8scope::views
