// Loss view: training and eval loss of every run overlaid; each run's loss minus the
// baseline's at the same step, raw and smoothed (EMA, span chosen in the toolbar), with
// the eval-loss difference as its own series; step time (log axis, so that a spike does
// not flatten the rest, ticked over all its decades in units that fit) and tokens/s. The three stacked plots share one step axis and
// line up. Below, the summary table of final losses, relative to the baseline.
#pragma once

#include "models/loss_summary_model.h"
#include "widgets/store_view.h"

class QCustomPlot;
class QCPAxisRect;
class QCPItemStraightLine;
class QCPTextElement;
class QSpinBox;
class QTableView;

namespace fp8scope::views {

class LossView : public StoreView {
    Q_OBJECT
public:
    static constexpr int kDefaultEmaSpan = 20;
    // The graphs of the difference plot, for each run but the baseline, in this order.
    enum DiffGraph { DiffRaw, DiffSmoothed, DiffEval, DiffGraphsPerRun };

    explicit LossView(const ViewContext& ctx, QWidget* parent = nullptr);
    const QAbstractItemModel* table() const override { return &summary_; }
    const LossSummaryModel& summary() const { return summary_; }
    QCustomPlot* plot() const { return plot_; }
    // The stacked plots, top to bottom: loss, difference to baseline, speed.
    QCPAxisRect* lossRect() const { return rects_[0]; }
    QCPAxisRect* diffRect() const { return rects_[1]; }
    QCPAxisRect* speedRect() const { return rects_[2]; }
    QSpinBox* emaSpan() const { return span_; }

protected:
    void redraw() override;

private:
    void rebuild(const TraceData& d);
    static QString diffTitle(bool one_run);
    QCustomPlot* plot_;
    QCPAxisRect* rects_[3];
    QCPTextElement* titles_[3];
    QCPItemStraightLine* cursor_lines_[3];
    QSpinBox* span_;
    LossSummaryModel summary_;
    QTableView* table_;
};

}  // namespace fp8scope::views
