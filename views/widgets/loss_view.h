// Loss view: training and eval loss of every run overlaid; each run's loss minus the
// baseline's at the same step, raw and smoothed (EMA, span chosen in the toolbar), with
// the eval-loss difference as its own series; step time (log axis, so that a spike does
// not flatten the rest, ticked over all its decades in units that fit) and tokens/s. The three stacked plots share one step axis and
// line up. Below, the summary table of final losses, relative to the baseline.
// A comparison trained with several seeds per recipe (train --seeds N) colours runs by
// recipe and draws in the difference plot, instead of each run's difference, every recipe's
// paired gap to the baseline over the seeds: its mean (line) and 95% interval (a band in
// the recipe's colour), on the series the seeds are judged on (seed_gap_model.h), with a
// table that says per recipe whether the gap at the end is larger than the seeds' noise.
// A zoom stays when new records arrive (a double-click shows every step again); the steps
// shown are announced (stepsShown, step_zoom.h), so that a large trace's are read at full detail.
#pragma once

#include "models/loss_summary_model.h"
#include "models/seed_gap_model.h"
#include "widgets/store_view.h"

class QCustomPlot;
class QCPAxisRect;
class QCPItemStraightLine;
class QCPTextElement;
class QLabel;
class QSpinBox;
class QTableView;

namespace fp8scope::views {

class StepZoom;

class LossView : public StoreView {
    Q_OBJECT
public:
    static constexpr int kDefaultEmaSpan = 20;
    // The graphs of the difference plot, for each run but the baseline, in this order.
    enum DiffGraph { DiffRaw, DiffSmoothed, DiffEval, DiffGraphsPerRun };
    // With several seeds: the zero line, then for each recipe but the baseline, in this order.
    enum BandGraph { BandLow, BandHigh, BandMean, BandGraphsPerRecipe };

    explicit LossView(const ViewContext& ctx, QWidget* parent = nullptr);
    const QAbstractItemModel* table() const override { return &summary_; }
    const LossSummaryModel& summary() const { return summary_; }
    const SeedGapModel& seedGaps() const { return seeds_; }
    QTableView* seedTable() const { return seed_table_; }
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
    void drawBands(const TraceData& d);
    QCustomPlot* plot_;
    StepZoom* zoom_;  // the user's step range, kept across rebuilds and announced
    QCPAxisRect* rects_[3];
    QCPTextElement* titles_[3];
    QCPItemStraightLine* cursor_lines_[3];
    QSpinBox* span_;
    LossSummaryModel summary_;
    QTableView* table_;
    SeedGapModel seeds_;
    QTableView* seed_table_;
    QLabel* seed_caption_;
};

}  // namespace fp8scope::views
