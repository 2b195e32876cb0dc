// Loss view. Plot data is rebuilt only when the store changed (or the EMA span); a cursor
// move only moves the cursor lines, which keeps scrubbing cheap on 100k-step runs.
#include "widgets/loss_view.h"

#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QSpinBox>
#include <QTableView>
#include <QVBoxLayout>

#include "models/display_names.h"
#include "models/loss_series.h"
#include "widgets/event_markers.h"
#include "widgets/plot_interaction.h"
#include "widgets/plot_style.h"

namespace fp8scope::views {

namespace {
QVector<double> qvec(const std::vector<double>& v) { return QVector<double>(v.begin(), v.end()); }
}  // namespace

LossView::LossView(const ViewContext& context, QWidget* parent)
    : StoreView(context, "loss", tr("Loss"), parent), summary_(context.store) {
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    auto* row = new QHBoxLayout;
    row->addWidget(new QLabel(tr("smoothing of the difference (EMA span, steps):"), this));
    span_ = new QSpinBox(this);
    span_->setRange(1, 10000);
    span_->setValue(kDefaultEmaSpan);
    row->addWidget(span_);
    row->addStretch();
    layout->addLayout(row);
    plot_ = make_plot(this, QString());
    plot_->setMinimumSize(300, 200);  // low enough that the dock band below can grow
    // Three axis rects in one plot, so that one margin group lines their left edges up.
    QCPLayoutGrid* grid = plot_->plotLayout();
    auto* margins = new QCPMarginGroup(plot_);
    const QString titles[3] = {tr("loss (lines), eval loss (dots)"), diffTitle(false),
                               tr("step time (log; solid) and tokens/s (dashed, right)")};
    const double heights[3] = {4, 3, 2};  // the loss curves get most of the height
    rects_[0] = plot_->axisRect();
    grid->take(rects_[0]);
    grid->simplify();
    QFont tf = plot_->xAxis->labelFont();
    tf.setBold(true);
    for (int i = 0; i < 3; ++i) {
        if (i > 0) rects_[i] = new QCPAxisRect(plot_);
        titles_[i] = new QCPTextElement(plot_, titles[i], tf);
        grid->addElement(2 * i, 0, titles_[i]);
        grid->addElement(2 * i + 1, 0, rects_[i]);
        grid->setRowStretchFactor(2 * i, 0.001);
        grid->setRowStretchFactor(2 * i + 1, heights[i]);
        rects_[i]->setMarginGroup(QCP::msLeft | QCP::msRight, margins);
        for (QCPAxis* a : rects_[i]->axes()) {
            a->setTickLabelFont(plot_->xAxis->tickLabelFont());
            a->setLabelFont(plot_->xAxis->labelFont());
        }
        cursor_lines_[i] = add_cursor_line(plot_, rects_[i]);
    }
    grid->setRowSpacing(0);
    // One step axis: zooming or panning any plot moves all three.
    for (int i = 0; i < 3; ++i)
        connect(rects_[i]->axis(QCPAxis::atBottom), qOverload<const QCPRange&>(&QCPAxis::rangeChanged), this,
                [this, i](const QCPRange& r) {
                    for (int j = 0; j < 3; ++j)
                        if (j != i && rects_[j]->axis(QCPAxis::atBottom)->range() != r)
                            rects_[j]->axis(QCPAxis::atBottom)->setRange(r);
                });
    rects_[0]->axis(QCPAxis::atLeft)->setLabel(tr("loss"));
    rects_[1]->axis(QCPAxis::atLeft)->setLabel(tr("loss - baseline"));
    rects_[2]->axis(QCPAxis::atLeft)->setLabel(tr("step time"));
    rects_[2]->axis(QCPAxis::atRight)->setLabel(tr("tokens/s"));
    rects_[2]->axis(QCPAxis::atRight)->setVisible(true);
    rects_[2]->axis(QCPAxis::atBottom)->setLabel(tr("step"));
    // Step times are in ms; a short plot: few labels, or they run into each other.
    set_log_ticks(rects_[2]->axis(QCPAxis::atLeft), 4, 1000.0);
    rects_[2]->axis(QCPAxis::atRight)->ticker()->setTickCount(3);
    for (int i = 0; i < 2; ++i) rects_[i]->axis(QCPAxis::atBottom)->setTickLabels(false);
    place_legend_below(plot_, 6);
    PlotInteraction::attach(plot_, context.cursor);

    table_ = new QTableView(this);
    table_->setModel(&summary_);
    table_->verticalHeader()->hide();
    table_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    table_->setTextElideMode(Qt::ElideRight);
    table_->setWordWrap(false);
    table_->setSizeAdjustPolicy(QAbstractScrollArea::AdjustToContents);
    table_->setVerticalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
    table_->verticalHeader()->setDefaultSectionSize(table_->fontMetrics().height() + 6);
    // The summary beside the plots, not under them: the three plots keep the height.
    auto* body = new QHBoxLayout;
    body->addWidget(plot_, 1);
    body->addWidget(table_, 0, Qt::AlignTop);
    layout->addLayout(body, 1);
    connect(span_, &QSpinBox::valueChanged, this, [this] {
        ctx().store->read([&](const TraceData& d) { rebuild(d); });
        plot_->replot();
    });
}

QString LossView::diffTitle(bool one_run) {
    return one_run ? tr("loss - baseline: one run, nothing to compare")
                   : tr("loss - baseline: raw (thin), EMA (thick), eval (dashed)");
}

void LossView::rebuild(const TraceData& d) {
    plot_->clearGraphs();
    const int base = baseline_run(d.meta);
    QCPAxisRect *lr = rects_[0], *dr = rects_[1], *sr = rects_[2];
    auto graph = [this](QCPAxisRect* r, QCPAxis::AxisType value_axis = QCPAxis::atLeft) {
        return plot_->addGraph(r->axis(QCPAxis::atBottom), r->axis(value_axis));
    };
    using R = trace::StepRecord;
    for (int r = 0; r < static_cast<int>(d.runs.size()); ++r) {
        const StepColumns& c = d.runs[r].steps;
        const QColor color = series_color(r);
        const QVector<double> steps = qvec(c.step);
        QCPGraph* g = graph(lr);
        g->setName(run_label(d.meta, r));
        g->setPen(QPen(color, 1.5));
        g->setData(steps, qvec(c[&R::loss]), true);
        const StepSeries evals = finite_points(c.step, c[&R::eval_loss]);
        QCPGraph* e = graph(lr);
        e->setName(run_label(d.meta, r) + tr(" eval"));
        e->setLineStyle(QCPGraph::lsNone);
        e->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, color, 5));
        e->setData(qvec(evals.step), qvec(evals.value), true);
        e->removeFromLegend();

        if (r != base && base >= 0 && base < static_cast<int>(d.runs.size())) {
            const LossDifference diff = loss_difference(c, d.runs[base].steps, span_->value());
            QColor light = color;
            light.setAlpha(90);
            QCPGraph* raw = graph(dr);
            raw->setName(run_label(d.meta, r) + tr(" raw"));
            raw->setPen(QPen(light, 1.0));
            raw->setData(qvec(diff.raw.step), qvec(diff.raw.value), true);
            raw->removeFromLegend();
            QCPGraph* smooth = graph(dr);
            smooth->setName(run_label(d.meta, r) + tr(" EMA"));
            smooth->setPen(QPen(color, 2.0));
            smooth->setData(qvec(diff.smoothed.step), qvec(diff.smoothed.value), true);
            smooth->removeFromLegend();
            QCPGraph* eval = graph(dr);
            eval->setName(run_label(d.meta, r) + tr(" eval"));
            eval->setPen(QPen(color, 1.2, Qt::DashLine));
            eval->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, color, 5));
            eval->setData(qvec(diff.eval.step), qvec(diff.eval.value), true);
            eval->removeFromLegend();
        }
        QCPGraph* t = graph(sr);
        t->setName(run_label(d.meta, r) + tr(" ms"));
        t->setPen(QPen(color, 1.0));
        t->setData(steps, gaps_for_log(qvec(c[&trace::StepRecord::step_ms])), true);
        t->removeFromLegend();
        QCPGraph* tok = graph(sr, QCPAxis::atRight);
        tok->setName(run_label(d.meta, r) + tr(" tokens/s"));
        tok->setPen(QPen(color, 1.0, Qt::DashLine));
        tok->setData(steps, qvec(c[&R::tokens_per_s]), true);
        tok->removeFromLegend();
    }
    fit_axes(plot_);
    if (QCPAxis* ms = sr->axis(QCPAxis::atLeft); ms->range().lower > 0) ms->setRangeLower(round_down_log(ms->range().lower));
    for (QCPAxisRect* r : rects_) mark_events(plot_, d, -1, r);
    set_placeholder(plot_, d.empty() ? tr("no steps yet") : QString());
    titles_[1]->setText(diffTitle(d.runs.size() == 1));
    plot_->legend->setVisible(plot_->legend->itemCount() > 0);
    wrap_legend(plot_);
}

void LossView::redraw() {
    if (dataChanged()) {
        ctx().store->read([&](const TraceData& d) { rebuild(d); });
        summary_.refresh();
        // Every run's row shows, the plots take the rest.
        table_->setFixedHeight(table_->horizontalHeader()->sizeHint().height() + table_->verticalHeader()->length() +
                               2 * table_->frameWidth() + 2);
    }
    for (auto* l : cursor_lines_) set_cursor_line(l, static_cast<double>(ctx().cursor->step()));
    dataChanged() ? plot_->replot() : replot_cursor_layer(plot_);
}

}  // namespace fp8scope::views
