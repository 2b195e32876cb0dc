// Health view. Ranks judged healthy are drawn thin in cool colours and flagged ranks thick
// in red and orange on top of them, so the slow rank is the line that stands out.
#include "widgets/health_view.h"

#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QScrollBar>
#include <QTableView>
#include <QVBoxLayout>
#include <algorithm>
#include <array>

#include "models/model_roles.h"
#include "widgets/event_markers.h"
#include "widgets/step_zoom.h"
#include "widgets/plot_interaction.h"
#include "widgets/plot_style.h"

namespace fp8scope::views {

namespace {
constexpr QRgb kHealthy[] = {0x1f77b4, 0x2ca02c, 0x17becf, 0x9467bd, 0x7f7f7f, 0x000080, 0x008080, 0x4b0082};
constexpr QRgb kFlagged[] = {0xd62728, 0xff7f0e, 0xe377c2};

QTableView* make_table(QWidget* parent, QAbstractItemModel* model) {
    auto* t = new QTableView(parent);
    t->setModel(model);
    t->setSelectionBehavior(QAbstractItemView::SelectRows);
    t->verticalHeader()->hide();
    t->verticalHeader()->setDefaultSectionSize(t->fontMetrics().height() + 6);
    t->horizontalHeader()->setStretchLastSection(true);
    t->setWordWrap(false);
    t->setToolTip(QObject::tr("double-click or Enter: move the step cursor to the row's step"));
    return t;
}
}  // namespace

HealthView::HealthView(const ViewContext& context, QWidget* parent)
    : StoreView(context, "health", tr("Health"), parent), ranks_(context.store), events_(context.store) {
    events_.showOnly({EventKind::Health, EventKind::ScalingMismatch, EventKind::WorldChanged});
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    verdict_ = new QLabel(this);
    verdict_->setTextFormat(Qt::PlainText);
    verdict_->setWordWrap(true);
    QFont vf = verdict_->font();
    vf.setBold(true);
    vf.setPointSizeF(vf.pointSizeF() * 1.15);
    verdict_->setFont(vf);
    layout->addWidget(verdict_);
    grad_sums_ = new QLabel(this);
    grad_sums_->setTextFormat(Qt::PlainText);
    grad_sums_->setWordWrap(true);  // in a narrow dock the type, saving and error go on a second line
    grad_sums_->setStyleSheet("QLabel { color: #333333; padding: 0px 8px 4px 8px; }");
    grad_sums_->hide();
    layout->addWidget(grad_sums_);
    scaling_ = new QLabel(this);
    scaling_->setTextFormat(Qt::PlainText);
    scaling_->setWordWrap(true);
    scaling_->setStyleSheet("QLabel { color: #a00000; background: #ffd7d7; padding: 4px 8px; }");
    scaling_->hide();
    layout->addWidget(scaling_);
    world_ = new QLabel(this);
    world_->setTextFormat(Qt::PlainText);
    world_->setWordWrap(true);
    world_->setStyleSheet("QLabel { color: #7a3c00; background: #ffe9c7; padding: 4px 8px; }");
    world_->hide();
    layout->addWidget(world_);

    body_ = new QWidget(this);
    auto* body = new QHBoxLayout(body_);
    body->setContentsMargins(0, 0, 0, 0);
    plot_ = make_plot(body_, QString());
    plot_->setMinimumSize(300, 200);  // low enough that the dock band below can grow
    // Compute above, comm below, one step axis; the legend under both.
    QCPLayoutGrid* grid = plot_->plotLayout();
    rects_[0] = plot_->axisRect();
    rects_[1] = new QCPAxisRect(plot_);
    grid->addElement(1, 0, rects_[1]);
    auto* margins = new QCPMarginGroup(plot_);
    const QString labels[2] = {tr("compute ms per step"), tr("comm ms (all-reduce wait)")};
    for (int i = 0; i < 2; ++i) {
        rects_[i]->setMarginGroup(QCP::msLeft | QCP::msRight, margins);
        for (QCPAxis* a : rects_[i]->axes()) {
            a->setTickLabelFont(plot_->xAxis->tickLabelFont());
            a->setLabelFont(plot_->xAxis->labelFont());
        }
        rects_[i]->axis(QCPAxis::atLeft)->setLabel(labels[i]);
        cursor_lines_[i] = add_cursor_line(plot_, rects_[i]);
        connect(rects_[i]->axis(QCPAxis::atBottom), qOverload<const QCPRange&>(&QCPAxis::rangeChanged), this,
                [this, i](const QCPRange& r) {
                    QCPAxis* other = rects_[1 - i]->axis(QCPAxis::atBottom);
                    if (other->range() != r) other->setRange(r);
                });
    }
    rects_[0]->axis(QCPAxis::atBottom)->setTickLabels(false);
    rects_[1]->axis(QCPAxis::atBottom)->setLabel(tr("step"));
    place_legend_below(plot_, 8);
    // place_legend_below put the legend right under the compute plot: the comm plot goes
    // between them.
    grid->take(rects_[1]);
    grid->simplify();
    int row = 0;
    while (row < grid->rowCount() && grid->element(row, 0) != rects_[0]) ++row;
    grid->insertRow(row + 1);
    grid->addElement(row + 1, 0, rects_[1]);
    PlotInteraction::attach(plot_, context.cursor);
    zoom_ = new StepZoom(plot_, rects_[0]->axis(QCPAxis::atBottom));
    connect(zoom_, &StepZoom::shown, this, &StoreView::stepsShown);
    body->addWidget(plot_, 1);

    auto* side = new QVBoxLayout;
    ranks_view_ = make_table(body_, &ranks_);
    ranks_view_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    // Sized to its columns (the side widens to fit), not stretched past them.
    ranks_view_->horizontalHeader()->setStretchLastSection(false);
    ranks_view_->setToolTip(tr("flag: median compute more than %1% above the median rank's; comm is the wait for "
                               "the slowest rank, so it is lowest on the slow one")
                                .arg(RankHealthModel::kSlowMargin * 100, 0, 'f', 0));
    side->addWidget(ranks_view_);
    auto* events_title = new QLabel(tr("health events"), body_);
    events_title->setSizePolicy(QSizePolicy::Preferred, QSizePolicy::Fixed);
    side->addWidget(events_title);
    events_view_ = make_table(body_, &events_);
    events_view_->setColumnHidden(EventsModel::Run, true);
    events_view_->setColumnHidden(EventsModel::Kind, true);
    events_view_->setWordWrap(true);  // a health event's detail is a sentence
    events_view_->horizontalHeader()->setSectionResizeMode(EventsModel::Step, QHeaderView::ResizeToContents);
    side->addWidget(events_view_, 1);
    side_ = new QWidget(body_);
    side_->setLayout(side);
    side_->setMinimumWidth(460);
    side_->setMaximumWidth(560);
    side->setContentsMargins(0, 0, 4, 0);
    body->addWidget(side_);
    layout->addWidget(body_, 1);

    for (QTableView* t : {ranks_view_, events_view_})
        connect(t, &QTableView::activated, this, [this](const QModelIndex& i) {
            const QVariant step = i.model()->data(i, kStepRole);
            if (step.isValid()) ctx().cursor->setStep(step.toLongLong());
        });
}

QString HealthView::verdict() const { return verdict_->text(); }
QString HealthView::gradientSums() const { return grad_sums_->isHidden() ? QString() : grad_sums_->text(); }
QString HealthView::scalingState() const { return scaling_->isHidden() ? QString() : scaling_->text(); }
QString HealthView::worldChanges() const { return world_->isHidden() ? QString() : world_->text(); }
bool HealthView::plotsShown() const { return !body_->isHidden(); }

void HealthView::showVerdict() {
    const bool dp = ranks_.dataParallel(), slow = !ranks_.slowRanks().empty();
    verdict_->setText(ranks_.verdict());
    verdict_->setAlignment(dp ? Qt::AlignLeft | Qt::AlignVCenter : Qt::AlignCenter);
    verdict_->setStyleSheet(!dp  ? "QLabel { color: #555555; padding: 8px; }"
                            : slow ? "QLabel { color: #a00000; background: #ffd7d7; padding: 8px; }"
                                   : "QLabel { color: #1e6b1e; background: #dcf2dc; padding: 8px; }");
    // One process: the message is the whole view, not a line above empty plots.
    static_cast<QBoxLayout*>(layout())->setStretchFactor(verdict_, dp ? 0 : 1);
    body_->setVisible(dp);
    grad_sums_->setText(ranks_.gradientSums());
    grad_sums_->setVisible(dp && !grad_sums_->text().isEmpty());
    scaling_->setText(ranks_.scalingState());
    scaling_->setVisible(dp && !scaling_->text().isEmpty());
    world_->setText(ranks_.worldChanges());
    world_->setVisible(dp && !world_->text().isEmpty());
    layout()->activate();  // the labels' new heights now, for the plots' sizes and a grab right after
}

void HealthView::rebuild(const TraceData& d) {
    plot_->clearGraphs();
    std::vector<int> order;  // healthy ranks first, so the flagged ones are drawn on top
    for (int k = 0; k < static_cast<int>(d.ranks.size()); ++k)
        if (!ranks_.flagged(k)) order.push_back(k);
    for (int k : ranks_.slowRanks()) order.push_back(k);
    int healthy = 0, flagged = 0;
    bool any = false;
    for (int k : order) {
        const RankColumns& c = d.ranks[static_cast<std::size_t>(k)];
        any = any || c.size() > 0;
        const bool slow = ranks_.flagged(k);
        const QPen pen = slow ? QPen(QColor(kFlagged[flagged++ % std::size(kFlagged)]), 2.6)
                              : QPen(QColor(kHealthy[healthy++ % std::size(kHealthy)]), 1.2);
        // The records read whole and a large trace's decimated others, merged by step.
        using R = trace::RankStepRecord;
        std::vector<std::array<double, 3>> points;  // step, compute, comm
        for (std::size_t i = 0; i < c.size(); ++i) points.push_back({c.step[i], c[&R::compute_ms][i], c[&R::comm_ms][i]});
        if (static_cast<std::size_t>(k) < d.ranks_decimated.size())
            for (const R& r : d.ranks_decimated[static_cast<std::size_t>(k)])
                points.push_back({static_cast<double>(r.step), r.compute_ms, r.comm_ms});
        std::sort(points.begin(), points.end(), [](const auto& a, const auto& b) { return a[0] < b[0]; });
        QVector<double> steps, values[2];
        for (const auto& p : points) {
            steps << p[0];
            values[0] << p[1];
            values[1] << p[2];
        }
        for (int i = 0; i < 2; ++i) {
            QCPGraph* g = plot_->addGraph(rects_[i]->axis(QCPAxis::atBottom), rects_[i]->axis(QCPAxis::atLeft));
            g->setPen(pen);
            g->setData(steps, values[i], true);
            g->setName(slow ? tr("rank %1 (slow)").arg(k) : tr("rank %1").arg(k));
            if (i == 1) g->removeFromLegend();
        }
    }
    zoom_->fit(static_cast<double>(d.first_step), static_cast<double>(d.last_step));
    // The pre-flight findings come at step 0, before the first step's records: the step
    // axis starts there so their marks and labels are not cut off at its left end.
    QCPAxis* steps_axis = rects_[0]->axis(QCPAxis::atBottom);
    for (const trace::EventRecord& e : d.events)
        if (e.kind == EventKind::Health && e.step < steps_axis->range().lower && !zoom_->zoomed())
            steps_axis->setRangeLower(static_cast<double>(e.step));
    // From zero, so a line's height is its time (30% slower looks 30% higher), with room
    // above the lines for the event labels.
    for (QCPAxisRect* r : rects_) {
        QCPAxis* y = r->axis(QCPAxis::atLeft);
        y->setRange(0, std::max(1.0, y->range().upper * 1.1));
        mark_events(plot_, d, -1, r);
    }
    set_placeholder(plot_, any ? QString() : tr("no step times yet"));
    plot_->legend->setVisible(plot_->legend->itemCount() > 0);
    wrap_legend(plot_);
}

void HealthView::redraw() {
    if (dataChanged()) {
        ranks_.refresh();
        events_.refresh();
        showVerdict();
        if (ranks_.dataParallel()) ctx().store->read([&](const TraceData& d) { rebuild(d); });
        // Every column shows without scrolling (measured errors are wider than float32's
        // dashes), every rank's row (up to 16), and the events take the rest.
        const int rows = std::min(ranks_.rowCount(), 16);
        int width = ranks_view_->horizontalHeader()->length() + 2 * ranks_view_->frameWidth() +
                    side_->layout()->contentsMargins().right();
        if (ranks_.rowCount() > rows) width += ranks_view_->verticalScrollBar()->sizeHint().width();
        side_->setMinimumWidth(std::max(460, width));
        side_->setMaximumWidth(std::max(560, width));
        ranks_view_->setFixedHeight(ranks_view_->horizontalHeader()->sizeHint().height() +
                                    rows * ranks_view_->verticalHeader()->defaultSectionSize() +
                                    2 * ranks_view_->frameWidth() + 2);
        events_view_->resizeRowsToContents();
        // The table's new size now, also for a grab right after (each layout only lays
        // out its own widget's children).
        for (QWidget* w : {body_, side_}) w->layout()->activate();
    }
    for (auto* l : cursor_lines_) set_cursor_line(l, static_cast<double>(ctx().cursor->step()));
    dataChanged() ? plot_->replot() : replot_cursor_layer(plot_);
}

}  // namespace fp8scope::views
