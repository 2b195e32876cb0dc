// Loss view: training and eval loss of every run overlaid, each run's loss minus the
// baseline's at the same step, and step time and tokens/s.
#pragma once

#include "widgets/store_view.h"

class QCustomPlot;
class QCPItemStraightLine;

namespace fp8scope::views {

class LossView : public StoreView {
    Q_OBJECT
public:
    explicit LossView(const ViewContext& ctx, QWidget* parent = nullptr);
    // The plots, top to bottom: loss, difference to baseline, speed (for tests).
    QCustomPlot* lossPlot() const { return loss_; }
    QCustomPlot* diffPlot() const { return diff_; }
    QCustomPlot* speedPlot() const { return speed_; }

protected:
    void redraw() override;

private:
    void rebuild(const TraceData& d);
    QCustomPlot *loss_, *diff_, *speed_;
    QCPItemStraightLine* cursor_lines_[3];
};

// The run whose training recipe is "baseline" (else run 0); -1 when there are no runs.
int baseline_run(const trace::TraceMeta& meta);

}  // namespace fp8scope::views
