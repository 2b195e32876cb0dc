// Stacked per-step bars of device time by category.
#include "widgets/step_cost_plot.h"

#include <QToolTip>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>
#include <qcustomplot.h>

#include "widgets/plot_style.h"
#include "widgets/step_zoom.h"

namespace fp8scope::views {

StepCostPlot::StepCostPlot(QWidget* parent) : QWidget(parent) {
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    plot_ = make_plot(this, tr("device time per step by category (ms)"));
    // The legend's rows would otherwise set the view's least height (a docked Kernels
    // view would make the window taller); the splitter gives the plot its room.
    plot_->setMinimumSize(50, 40);
    layout->addWidget(plot_);
    plot_->xAxis->setLabel(tr("step"));
    plot_->yAxis->setLabel(tr("ms"));
    QCPBars* below = nullptr;
    for (int c = 0; c < kStepCategories; ++c) {
        auto* bars = new QCPBars(plot_->xAxis, plot_->yAxis);
        bars->setName(step_category_name(static_cast<StepCategory>(c)));
        bars->setPen(Qt::NoPen);
        bars->setBrush(step_category_color(static_cast<StepCategory>(c)));
        bars->setWidthType(QCPBars::wtPlotCoords);
        bars->setWidth(0.8);
        if (below) bars->moveAbove(below);
        below = bars;
    }
    // The steps that kept their individual records: a mark under the bar (the others'
    // bars come from their kernel sums).
    detail_ = plot_->addGraph();
    detail_->setName(tr("individual records"));
    detail_->setLineStyle(QCPGraph::lsNone);
    detail_->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssTriangle, Qt::black, Qt::black, 6));
    place_legend_below(plot_, kStepCategories);
    cursor_ = add_cursor_line(plot_);
    plot_->setToolTip(tr("Summed duration of the run's device records per step and category; eval: the run's "
                         "evaluation after the step; idle: time within the run's device spans (its training records' "
                         "first start to last end, and its evaluation's) with no kernel, copy or memset running"));
    // A bar is 0.8 steps wide, but never narrower than a pixel: over a long run (a large
    // trace's decimated steps) the bars stay visible.
    connect(plot_->xAxis, qOverload<const QCPRange&>(&QCPAxis::rangeChanged), this, [this](const QCPRange& r) {
        const double px = std::max(1, plot_->axisRect()->width());
        for (int c = 0; c < kStepCategories; ++c)
            qobject_cast<QCPBars*>(plot_->plottable(c))->setWidth(std::max(0.8, r.size() / px));
    });
    zoom_ = new StepZoom(plot_, plot_->xAxis);
    connect(zoom_, &StepZoom::shown, this, &StepCostPlot::stepsShown);
    plot_->setMouseTracking(true);
    connect(plot_, &QCustomPlot::mouseMove, this, &StepCostPlot::onMove);
    connect(plot_, &QCustomPlot::mousePress, this, [this](QMouseEvent* e) {
        if (const StepBreakdown* b = at(plot_->xAxis->pixelToCoord(e->pos().x()))) emit stepClicked(b->step);
    });
}

void StepCostPlot::setSteps(std::vector<StepBreakdown> steps) {
    steps_ = std::move(steps);
    QVector<double> x;
    for (const auto& s : steps_) x.push_back(static_cast<double>(s.step));
    for (int c = 0; c < kStepCategories; ++c) {
        QVector<double> y;
        for (const auto& s : steps_) y.push_back(s.ns[static_cast<std::size_t>(c)] * 1e-6);
        qobject_cast<QCPBars*>(plot_->plottable(c))->setData(x, y, true);
    }
    // Marks only where some steps have sums alone: with every step's records they say nothing.
    QVector<double> marked, zero;
    const bool summed = std::any_of(steps_.begin(), steps_.end(), [](const StepBreakdown& s) { return s.summed; });
    for (const auto& s : steps_)
        if (summed && !s.summed) {
            marked.push_back(static_cast<double>(s.step));
            zero.push_back(0);
        }
    detail_->setData(marked, zero, true);
    detail_->removeFromLegend();
    if (summed) detail_->addToLegend();
    set_placeholder(plot_, steps_.empty() ? tr("no kernel records in this run") : QString());
    zoom_->fit(steps_.empty() ? 0.0 : static_cast<double>(steps_.front().step),
               steps_.empty() ? 0.0 : static_cast<double>(steps_.back().step));
    // One step far above the rest (the first: cuBLASLt's heuristics, allocations) would
    // flatten every other bar: the axis stops above the second highest, the title says.
    std::vector<std::pair<double, std::int64_t>> heights;
    for (const auto& s : steps_) {
        double ms = 0;
        for (double ns : s.ns) ms += ns * 1e-6;
        heights.emplace_back(ms, s.step);
    }
    std::sort(heights.rbegin(), heights.rend());
    QString title = tr("device time per step by category (ms)");
    if (heights.size() > 2 && heights[0].first > 2 * heights[1].first) {
        plot_->yAxis->setRange(0, heights[1].first * 1.15);
        title += tr("; step %1 (%2 ms) runs off the top").arg(heights[0].second).arg(heights[0].first, 0, 'f', 1);
    }
    set_title(plot_, title);
    plot_->replot();
}

void StepCostPlot::setCursorStep(std::int64_t step) {
    set_cursor_line(cursor_, static_cast<double>(step));
    replot_cursor_layer(plot_);
}

const StepBreakdown* StepCostPlot::at(double x) const {
    const auto step = static_cast<std::int64_t>(std::llround(x));
    for (const auto& s : steps_)
        if (s.step == step) return &s;
    return nullptr;
}

QString StepCostPlot::describe(std::int64_t step) const {
    const StepBreakdown* b = at(static_cast<double>(step));
    if (!b) return {};
    QString text = b->summed ? tr("step %1: %2 calls (kernel sums: the step's individual records were not kept)")
                                   .arg(b->step).arg(b->records)
                             : tr("step %1: %2 ms device span, %3 records").arg(b->step).arg(b->window_ns * 1e-6, 0, 'f', 3).arg(b->records);
    for (int c = kStepCategories - 1; c >= 0; --c)
        if (b->ns[static_cast<std::size_t>(c)] > 0)
            text += QStringLiteral("\n%1: %2 ms").arg(step_category_name(static_cast<StepCategory>(c)))
                        .arg(b->ns[static_cast<std::size_t>(c)] * 1e-6, 0, 'f', 3);
    return text;
}

void StepCostPlot::onMove(QMouseEvent* e) {
    const StepBreakdown* b = at(plot_->xAxis->pixelToCoord(e->pos().x()));
    if (b) QToolTip::showText(e->globalPosition().toPoint(), describe(b->step), plot_);
    else QToolTip::hideText();
}

}  // namespace fp8scope::views
