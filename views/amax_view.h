// Amax and scale view: the selected operand's amax at every step and the scale in use
// (log axes), the delayed recipe's amax history window at the cursor's capture step, and
// overflow events: steps whose amax times the scale in use passes the format's maximum
// (a spike that delayed scaling's history did not foresee; the values saturate).
#pragma once

#include "store_view.h"

class QCustomPlot;
class QCPItemStraightLine;
class QCPItemRect;

namespace fp8scope::views {

class AmaxView : public StoreView {
    Q_OBJECT
public:
    explicit AmaxView(const ViewContext& ctx, QWidget* parent = nullptr);
    QCustomPlot* plot() const { return plot_; }
    // Graphs of plot(): amax, scale, history window, overflow markers.
    enum Graph { AmaxGraph, ScaleGraph, HistoryGraph, OverflowGraph };

protected:
    void redraw() override;

private:
    QCustomPlot* plot_;
    QCPItemStraightLine* cursor_line_;
    QCPItemRect* window_;
    OperandRef shown_;
    int shown_run_ = -1;
};

// FP8 maximum of an analysis recipe name; 448 (E4M3) when the name does not parse.
double recipe_fp8_max(const std::string& recipe);

}  // namespace fp8scope::views
