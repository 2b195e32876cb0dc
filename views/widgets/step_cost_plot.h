// The device time of each of a run's steps, stacked by category (kernel_breakdown.h):
// GEMM, quantize, capture, attention, optimizer, communication, copies, other, the
// run's evaluation after the step, and idle (within the step's device span, no record
// running). A step whose individual records were not kept has its bar from its kernel
// sums (no idle); when some steps are so, the steps with records are marked under their
// bars. Hovering a bar names its figures; clicking one moves the cursor there. A large
// trace's steps outside those read whole are its decimated steps (kernel_breakdown.h).
#pragma once

#include <QWidget>
#include <cstdint>
#include <vector>

#include "models/kernel_breakdown.h"

class QCustomPlot;
class QCPItemStraightLine;
class QCPGraph;
class QMouseEvent;

namespace fp8scope::views {

class StepZoom;

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
    // Zoomed or panned to steps [first, last] (step_zoom.h); the zoom stays across setSteps.
    void stepsShown(qint64 first, qint64 last);

private:
    void onMove(QMouseEvent* e);
    const StepBreakdown* at(double x) const;

    QCustomPlot* plot_;
    QCPItemStraightLine* cursor_;
    QCPGraph* detail_;  // marks the steps with individual records
    StepZoom* zoom_;
    std::vector<StepBreakdown> steps_;
};

}  // namespace fp8scope::views
