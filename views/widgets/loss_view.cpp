// Loss view. Plot data is rebuilt only when the store changed (or the EMA span); a cursor
// move only moves the cursor lines, which keeps scrubbing cheap on 100k-step runs.
#include "widgets/loss_view.h"

#include <QHBoxLayout>
#include <cmath>
#include <QHeaderView>
#include <QLabel>
#include <QSpinBox>
#include <QTableView>
#include <QVBoxLayout>

#include "models/display_names.h"
#include "models/loss_series.h"
#include "widgets/event_markers.h"
#include "widgets/plot_interaction.h"
#include "widgets/step_zoom.h"
#include "widgets/plot_style.h"

namespace fp8scope::views {

namespace {
QVector<double> qvec(const std::vector<double>& v) { return QVector<double>(v.begin(), v.end()); }
}  // namespace

LossView::LossView(const ViewContext& context, QWidget* parent)
    : StoreView(context, "loss", tr("Loss"), parent), summary_(context.store), seeds_(context.store) {
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
    zoom_ = new StepZoom(plot_, rects_[0]->axis(QCPAxis::atBottom));
    connect(zoom_, &StepZoom::shown, this, &StoreView::stepsShown);
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
    seed_table_ = new QTableView(this);
    seed_table_->setModel(&seeds_);
    seed_table_->verticalHeader()->hide();
    seed_table_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    seed_table_->setWordWrap(false);
    seed_table_->setSizeAdjustPolicy(QAbstractScrollArea::AdjustToContents);
    seed_table_->setVerticalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
    seed_table_->verticalHeader()->setDefaultSectionSize(seed_table_->fontMetrics().height() + 6);
    seed_table_->hide();
    seed_caption_ = new QLabel(this);
    seed_caption_->setWordWrap(true);
    seed_caption_->setSizePolicy(QSizePolicy::Preferred, QSizePolicy::Maximum);  // the stretch below takes the rest
    seed_caption_->hide();
    // The summaries beside the plots, not under them: the three plots keep the height.
    auto* side = new QVBoxLayout;
    side->addWidget(table_);
    side->addWidget(seed_caption_);
    side->addWidget(seed_table_);
    side->addStretch();
    auto* body = new QHBoxLayout;
    body->addWidget(plot_, 1);
    body->addLayout(side, 0);
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
    const bool seeded = seeds_.gaps().has_value();
    const int per_recipe = seeded ? seeds_.gaps()->comparison.seeds : 1;
    QCPAxisRect *lr = rects_[0], *dr = rects_[1], *sr = rects_[2];
    auto graph = [this](QCPAxisRect* r, QCPAxis::AxisType value_axis = QCPAxis::atLeft) {
        return plot_->addGraph(r->axis(QCPAxis::atBottom), r->axis(value_axis));
    };
    using R = trace::StepRecord;
    for (int r = 0; r < static_cast<int>(d.runs.size()); ++r) {
        const StepColumns& c = d.runs[r].steps;
        const QColor color = series_color(r / per_recipe);  // several seeds: the recipe's colour
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

        if (!seeded && r != base && base >= 0 && base < static_cast<int>(d.runs.size())) {
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
    if (seeded) drawBands(d);
    zoom_->fit(static_cast<double>(d.first_step), static_cast<double>(d.last_step));
    if (QCPAxis* ms = sr->axis(QCPAxis::atLeft); ms->range().lower > 0) ms->setRangeLower(round_down_log(ms->range().lower));
    for (QCPAxisRect* r : rects_) mark_events(plot_, d, -1, r);
    set_placeholder(plot_, d.empty() ? tr("no steps yet") : QString());
    titles_[1]->setText(seeded ? tr("gap to baseline (%1): mean, 95% CI band over %2 seeds")
                                     .arg(QString::fromLatin1(stats::gap_series_name(seeds_.gaps()->comparison.series)))
                                     .arg(per_recipe)
                               : diffTitle(d.runs.size() == 1));
    plot_->legend->setVisible(plot_->legend->itemCount() > 0);
    wrap_legend(plot_);
}

// Every recipe's mean gap and its interval as a band between two graphs, over a zero line.
void LossView::drawBands(const TraceData& d) {
    const stats::SeedComparison& c = seeds_.gaps()->comparison;
    QCPAxisRect* dr = rects_[1];
    QCPGraph* zero = plot_->addGraph(dr->axis(QCPAxis::atBottom), dr->axis(QCPAxis::atLeft));
    zero->setName(tr("zero"));
    zero->setPen(QPen(QColor(120, 120, 120), 1.0, Qt::DotLine));
    zero->setData(QVector<double>{double(d.first_step), double(d.last_step)}, QVector<double>{0, 0}, true);
    zero->removeFromLegend();
    for (int g = 0; g < int(c.gap.size()); ++g) {
        if (g == c.baseline) continue;
        const stats::GapCurve& curve = c.gap[std::size_t(g)];
        QVector<double> lo, hi, mean;
        for (const stats::PairedDifference& p : curve.at) {
            lo.push_back(p.lo());
            hi.push_back(p.hi());
            mean.push_back(p.mean);
        }
        const QVector<double> steps = qvec(curve.step);
        const QColor color = series_color(g);
        QColor edge = color, fill = color;  // translucent: the other recipes' bands show through
        edge.setAlpha(110);
        fill.setAlpha(60);
        const QString name = QString::fromStdString(seeds_.gaps()->recipes[std::size_t(g)]);
        QCPGraph* low = plot_->addGraph(dr->axis(QCPAxis::atBottom), dr->axis(QCPAxis::atLeft));
        QCPGraph* high = plot_->addGraph(dr->axis(QCPAxis::atBottom), dr->axis(QCPAxis::atLeft));
        QCPGraph* line = plot_->addGraph(dr->axis(QCPAxis::atBottom), dr->axis(QCPAxis::atLeft));
        low->setName(name + tr(" 95% low"));
        high->setName(name + tr(" 95% high"));
        line->setName(name + tr(" mean gap"));
        low->setPen(QPen(edge, 0.8));
        high->setPen(QPen(edge, 0.8));
        high->setBrush(fill);
        high->setChannelFillGraph(low);
        line->setPen(QPen(color, 2.0));
        line->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, color, curve.at.size() < 60 ? 5 : 0));
        low->setData(steps, lo, true);
        high->setData(steps, hi, true);
        line->setData(steps, mean, true);
        for (QCPGraph* x : {low, high, line}) x->removeFromLegend();
    }
}

void LossView::redraw() {
    if (dataChanged()) {
        seeds_.refresh();  // before the plots: they draw its bands
        ctx().store->read([&](const TraceData& d) { rebuild(d); });
        summary_.refresh();
        const bool seeded = seeds_.gaps().has_value();
        seed_table_->setVisible(seeded);
        seed_caption_->setVisible(seeded);
        if (seeded) {
            const trace::SeedGaps& g = *seeds_.gaps();
            double last = NAN;  // the step of the last point judged
            for (const stats::GapCurve& curve : g.comparison.gap)
                if (!curve.step.empty()) last = curve.step.back();
            seed_caption_->setText(tr("Gap to the baseline at step %1 (%4), seeds %2..%3 paired by seed; 95% CI:")
                                       .arg(last)
                                       .arg(g.first_seed)
                                       .arg(g.first_seed + std::uint64_t(g.comparison.seeds) - 1)
                                       .arg(QString::fromLatin1(stats::gap_series_name(g.comparison.series))));
        }
        seed_table_->setFixedHeight(seed_table_->horizontalHeader()->sizeHint().height() +
                                    seed_table_->verticalHeader()->length() + 2 * seed_table_->frameWidth() + 2);
        layout()->activate();  // a table shown or hidden takes its place now, not at the next event
        // Every run's row shows, the plots take the rest.
        table_->setFixedHeight(table_->horizontalHeader()->sizeHint().height() + table_->verticalHeader()->length() +
                               2 * table_->frameWidth() + 2);
    }
    for (auto* l : cursor_lines_) set_cursor_line(l, static_cast<double>(ctx().cursor->step()));
    dataChanged() ? plot_->replot() : replot_cursor_layer(plot_);
}

}  // namespace fp8scope::views
