// Health view: is any rank of a data-parallel job slow, and which? A one-line verdict on
// top and under it one line on what the gradient sums cost (in BF16 or FP8 also what they
// save against float32 and the error they added); per-rank lines over steps of compute time and, below on the same step axis,
// of the time spent waiting for the gradient all-reduce (comm: fast ranks wait for the
// slow one, so a slow rank shows as high compute and low comm); the table of ranks
// (medians, the slowest step, gradient megabytes and sum error, a flag on ranks more than
// 10% slower than the median rank) with the flagged ranks' lines and rows in red; and the
// job's health events. When the ranks' delayed-scaling state differed (a scaling_mismatch
// event), a red line under the verdict says so and the events list the tensors. When an
// elastic job lost ranks and went on, or took ranks in (world_changed events), an amber
// line per change says when, which ranks, the new world and the steps lost; the events
// list them and the plots mark them. A single-process trace shows one line saying it has no
// health records instead of empty plots. A large trace's lines are decimated before its
// newest steps (each bucket's extremes kept), a zoom reads its steps whole; the table and
// the verdict are of the steps read whole, and say which.
#pragma once

#include "models/events_model.h"
#include "models/rank_health_model.h"
#include "widgets/store_view.h"

class QCustomPlot;
class QCPAxisRect;
class QCPItemStraightLine;
class QLabel;
class QTableView;

namespace fp8scope::views {

class StepZoom;

class HealthView : public StoreView {
    Q_OBJECT
public:
    explicit HealthView(const ViewContext& ctx, QWidget* parent = nullptr);
    const QAbstractItemModel* table() const override { return &ranks_; }
    const RankHealthModel& ranks() const { return ranks_; }
    const EventsModel& healthEvents() const { return events_; }
    QString verdict() const;
    QString gradientSums() const;  // the line under the verdict; empty when it is hidden
    QString scalingState() const;  // the red line on scaling mismatches; empty when hidden
    QString worldChanges() const;  // the lines on an elastic job's lost ranks; empty when hidden
    bool plotsShown() const;
    QCustomPlot* plot() const { return plot_; }
    QCPAxisRect* computeRect() const { return rects_[0]; }
    QCPAxisRect* commRect() const { return rects_[1]; }

protected:
    void redraw() override;

private:
    void rebuild(const TraceData& d);
    void showVerdict();
    QLabel* verdict_;
    QLabel* grad_sums_;
    QLabel* scaling_;
    QLabel* world_;
    QWidget* body_;
    QCustomPlot* plot_;
    QCPAxisRect* rects_[2];
    StepZoom* zoom_;  // the step axes' zoom, kept across rebuilds and announced
    QCPItemStraightLine* cursor_lines_[2];
    RankHealthModel ranks_;
    EventsModel events_;
    QTableView* ranks_view_;
    QWidget* side_;  // the rank table over the events, beside the plots
    QTableView* events_view_;
};

}  // namespace fp8scope::views
