// The device time of each of a run's steps, stacked by category (kernel_breakdown.h):
// GEMM, quantize, capture, attention, optimizer, communication, copies, other, the
// run's evaluation after the step, and idle (within the step's device span, no record
// running). Hovering a bar names its figures; clicking one moves the cursor there.
#pragma once

#include <QWidget>
#include <cstdint>
#include <vector>

#include "models/kernel_breakdown.h"

class QCustomPlot;
class QCPItemStraightLine;
class QMouseEvent;

namespace fp8scope::views {

class StepCostPlot : public QWidget {
    Q_OBJECT
public:
    explicit StepCostPlot(QWidget* parent = nullptr);
    void setSteps(std::vector<StepBreakdown> steps);
    void setCursorStep(std::int64_t step);
    const std::vector<StepBreakdown>& steps() const { return steps_; }
    QCustomPlot* plot() const { return plot_; }
    // The hover text of the bar at `step` (empty when none).
    QString describe(std::int64_t step) const;

signals:
    void stepClicked(std::int64_t step);

private:
    void onMove(QMouseEvent* e);
    const StepBreakdown* at(double x) const;

    QCustomPlot* plot_;
    QCPItemStraightLine* cursor_;
    std::vector<StepBreakdown> steps_;
};

}  // namespace fp8scope::views
