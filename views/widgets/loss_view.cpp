// Loss view. Plot data is rebuilt only when the store changed; a cursor move only moves
// the cursor lines, which keeps scrubbing cheap on 100k-step runs.
#include "widgets/loss_view.h"

#include <QVBoxLayout>

#include "models/display_names.h"
#include "widgets/plot_style.h"

namespace fp8scope::views {

int baseline_run(const trace::TraceMeta& meta) {
    for (std::size_t r = 0; r < meta.runs.size(); ++r)
        if (meta.runs[r].recipe == "baseline") return static_cast<int>(r);
    return meta.runs.empty() ? -1 : 0;
}

LossView::LossView(const ViewContext& context, QWidget* parent) : StoreView(context, "loss", tr("Loss"), parent) {
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    loss_ = make_plot(this, tr("loss (lines) and eval loss (dots)"));
    diff_ = make_plot(this, tr("loss - baseline loss"));
    speed_ = make_plot(this, tr("step time (ms, solid) and tokens/s (dashed, right)"));
    layout->addWidget(loss_, 3);
    layout->addWidget(diff_, 2);
    layout->addWidget(speed_, 2);
    speed_->yAxis2->setVisible(true);
    QCustomPlot* plots[3] = {loss_, diff_, speed_};
    speed_->xAxis->setLabel(tr("step"));  // the three plots share their steps; one label
    for (int i = 0; i < 3; ++i) {
        cursor_lines_[i] = add_cursor_line(plots[i]);
        // Zooming one plot's steps zooms the others.
        for (int j = 0; j < 3; ++j)
            if (i != j)
                connect(plots[i]->xAxis, qOverload<const QCPRange&>(&QCPAxis::rangeChanged), plots[j]->xAxis,
                        [p = plots[j]](const QCPRange& r) {
                            if (p->xAxis->range() != r) { p->xAxis->setRange(r); p->replot(QCustomPlot::rpQueuedReplot); }
                        });
    }
    place_legend_below(loss_, 6);  // the plot is short: any corner inside covers a curve
}

static QVector<double> qvec(const std::vector<double>& v) { return QVector<double>(v.begin(), v.end()); }

void LossView::rebuild(const TraceData& d) {
    for (QCustomPlot* p : {loss_, diff_, speed_}) p->clearGraphs();
    const int base = baseline_run(d.meta);
    for (int r = 0; r < static_cast<int>(d.runs.size()); ++r) {
        const StepColumns& c = d.runs[r].steps;
        const QColor color = series_color(r);
        const QVector<double> steps = qvec(c.step);
        QCPGraph* g = loss_->addGraph();
        g->setName(run_label(d.meta, r));
        g->setPen(QPen(color, 1.5));
        g->setData(steps, qvec(c.loss), true);
        QVector<double> ek, ev;
        for (std::size_t i = 0; i < c.size(); ++i)
            if (c.eval_loss[i] == c.eval_loss[i]) { ek << c.step[i]; ev << c.eval_loss[i]; }
        QCPGraph* e = loss_->addGraph();
        e->setName(run_label(d.meta, r) + tr(" eval"));
        e->setLineStyle(QCPGraph::lsNone);
        e->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, color, 5));
        e->setData(ek, ev, true);
        e->removeFromLegend();

        if (r != base && base >= 0) {
            // Runs of one lock-step comparison share steps; match them by step number.
            const StepColumns& b = d.runs[base].steps;
            QVector<double> dk, dv;
            std::size_t j = 0;
            for (std::size_t i = 0; i < c.size(); ++i) {
                while (j < b.size() && b.step[j] < c.step[i]) ++j;
                if (j < b.size() && b.step[j] == c.step[i]) { dk << c.step[i]; dv << c.loss[i] - b.loss[j]; }
            }
            QCPGraph* dg = diff_->addGraph();
            dg->setName(run_label(d.meta, r));
            dg->setPen(QPen(color, 1.2));
            dg->setData(dk, dv, true);
        }
        QVector<double> ms(c.step_time_s.begin(), c.step_time_s.end());
        for (double& x : ms) x *= 1e3;
        QCPGraph* t = speed_->addGraph();
        t->setName(run_label(d.meta, r));
        t->setPen(QPen(color, 1.0));
        t->setData(steps, ms, true);
        QCPGraph* tok = speed_->addGraph(speed_->xAxis, speed_->yAxis2);
        tok->setPen(QPen(color, 1.0, Qt::DashLine));
        tok->setData(steps, qvec(c.tokens_per_s), true);
    }
    for (QCustomPlot* p : {loss_, diff_, speed_}) {
        fit_axes(p);
        set_placeholder(p, d.empty() ? tr("no steps yet") : QString());
    }
    if (!d.empty() && d.runs.size() < 2) set_placeholder(diff_, tr("one run: no baseline comparison"));
    loss_->legend->setVisible(loss_->graphCount() > 0);
    wrap_legend(loss_);
    speed_->yAxis->setLabel(tr("ms"));
    speed_->yAxis2->setLabel(tr("tokens/s"));
}

void LossView::redraw() {
    if (dataChanged()) ctx().store->read([&](const TraceData& d) { rebuild(d); });
    for (auto* l : cursor_lines_) set_cursor_line(l, static_cast<double>(ctx().cursor->step()));
    const bool full = dataChanged();
    for (QCustomPlot* p : {loss_, diff_, speed_}) full ? p->replot() : replot_cursor_layer(p);
}

}  // namespace fp8scope::views
