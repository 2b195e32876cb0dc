// Amax and scale view: the amax of every selected operand at every step, one colour per
// operand, with its scale in use (dashed, right log axis) and its overflow events: steps
// whose amax times the scale in use rounds past the format's maximum in the cast (a spike
// that delayed scaling's history did not foresee; the values saturate). Current scaling's
// amax x scale lands on the maximum up to float32 rounding and never saturates. For the current operand, the
// delayed recipe's amax history window at the cursor's capture step. With a run chosen to
// compare with (the baseline by default), that run's amax and scale of the current operand
// in a second colour, the legend naming both runs. A large trace's steps outside those read
// whole are drawn decimated (each bucket's smallest and largest amax and scale kept); a
// zoom reads its steps at full detail (stepsShown) and stays while they arrive.
#pragma once

#include <vector>

#include "widgets/store_view.h"

class QCustomPlot;
class QCPGraph;
class QCPItemStraightLine;
class QCPItemRect;
class QCPLayer;

namespace fp8scope::views {

class CompareRunCombo;
class StepZoom;

class AmaxView : public StoreView {
    Q_OBJECT
public:
    // More curves than this on one plot cannot be told apart; the legend says how many
    // selected operands are left out.
    static constexpr int kMaxOperands = 8;
    // The graphs drawn for each operand.
    enum Graph { AmaxGraph, ScaleGraph, OverflowGraph, GraphsPerOperand };

    explicit AmaxView(const ViewContext& ctx, QWidget* parent = nullptr);
    QCustomPlot* plot() const { return plot_; }
    // The drawn operands: the selected ones in slot order, at most kMaxOperands, always
    // with the current one.
    int operandCount() const { return static_cast<int>(curves_.size()); }
    OperandRef operandAt(int i) const { return curves_[i].ref; }
    QCPGraph* graph(int operand, Graph g) const { return curves_[operand].graphs[g]; }
    QCPGraph* historyGraph() const { return history_; }
    CompareRunCombo* compareRun() const { return compare_; }
    // The compared run's amax or scale of the current operand; nullptr when none is drawn.
    QCPGraph* otherGraph(Graph g) const { return g == AmaxGraph || g == ScaleGraph ? other_[g] : nullptr; }

protected:
    void redraw() override;

private:
    struct Curve {
        OperandRef ref;
        QCPGraph* graphs[GraphsPerOperand];
    };
    void rebuild(const TraceData& d, int run, const std::vector<OperandRef>& refs, std::size_t selected);
    bool drawOther(const TraceData& d, int run, int other, const OperandRef& current);
    bool drawHistory(const RunData& rd, std::int64_t step);
    void clearCurves();

    QCustomPlot* plot_;
    QCPItemStraightLine* cursor_line_;
    QCPItemRect* window_;
    QCPLayer* window_layer_;
    QCPGraph* history_;
    std::vector<Curve> curves_;
    CompareRunCombo* compare_;
    StepZoom* zoom_;  // kept across rebuilds; announces the steps shown
    QCPGraph* other_[2] = {nullptr, nullptr};  // the compared run's amax and scale
    std::vector<QCPGraph*> keys_;  // legend entries that explain the line styles
    std::vector<OperandRef> shown_;
    OperandRef shown_current_;
    int shown_run_ = -1;
    int shown_other_ = -1;
};

// The operands the view draws for a selection of `selected` with current `current`.
std::vector<OperandRef> drawn_operands(const std::vector<OperandRef>& selected, const OperandRef& current);

}  // namespace fp8scope::views
