// FP8 worth view.
#include "widgets/fp8_worth_view.h"

#include <QHeaderView>
#include <QLabel>
#include <QSplitter>
#include <QTableView>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>
#include <vector>
#include <qcustomplot.h>

#include "models/display_names.h"
#include "models/kernel_detail.h"
#include "widgets/compare_run_combo.h"
#include "widgets/plot_style.h"

namespace fp8scope::views {

Fp8WorthView::Fp8WorthView(const ViewContext& context, QWidget* parent)
    : StoreView(context, "fp8worth", tr("FP8 worth"), parent), model_(context.store) {
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    compare_ = add_compare_run_row(layout, this);
    note_ = new QLabel(this);
    note_->setWordWrap(true);
    layout->addWidget(note_);
    auto* split = new QSplitter(Qt::Vertical, this);
    plot_ = make_plot(split, tr("FP8 time saved against error added, per GEMM"));
    plot_->xAxis->setLabel(tr("SQNR dB (the GEMM output's, else its worse operand's; right: less error)"));
    plot_->yAxis->setLabel(tr("time saved per step µs"));
    plot_->legend->setVisible(true);
    sorted_.setSourceModel(&model_);
    sorted_.setSortRole(Qt::UserRole);
    view_ = new QTableView(split);
    view_->setModel(&sorted_);
    view_->setSortingEnabled(true);
    view_->sortByColumn(Fp8WorthModel::Saved, Qt::DescendingOrder);
    view_->verticalHeader()->hide();
    view_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    split->addWidget(plot_);
    split->addWidget(view_);
    split->setSizes({320, 260});
    layout->addWidget(split);
    connect(compare_, &QComboBox::currentIndexChanged, this, [this] { refresh(true); });
}

QString Fp8WorthView::noteText() const { return note_->text(); }

void Fp8WorthView::redraw() {
    if (dataChanged()) ctx().store->read([&](const TraceData& d) { compare_->fill(d.meta); });
    // The selected run against the chosen one; with the chosen run selected, the first other run.
    int run = ctx().selection->run();
    const int runs = ctx().store->read([](const TraceData& d) { return static_cast<int>(d.runs.size()); });
    if (run == compare_->chosenRun()) run = compare_->chosenRun() == 0 ? 1 : 0;
    if (run >= runs) run = -1;
    const int base = run < 0 ? -1 : compare_->otherThan(run);
    model_.refresh(base, run, ctx().cursor->step());
    const Fp8Worth& w = model_.worth();
    const QString note = ctx().store->read([&](const TraceData& d) -> QString {
        if (base < 0) return tr("Choose a run to compare %1 with (the baseline of a lock-step comparison).").arg(run_label(d.meta, run));
        if (w.steps.empty())
            return tr("%1 and %2 have no step with kernel records in common (a GPU trace with kernel timing is needed).")
                .arg(run_label(d.meta, base), run_label(d.meta, run));
        return tr("%1 against %2: median over %3 timed steps (%4: kernel records, or host ops in a run without them); a GEMM's time includes half of each "
                  "cast of its operands.")
            .arg(run_label(d.meta, run), run_label(d.meta, base)).arg(w.steps.size()).arg(step_ranges(w.steps, 4));
    });
    note_->setText(note);
    plot_->clearGraphs();
    for (int i = plot_->itemCount() - 1; i >= 0; --i)  // the labels; make_plot's placeholder stays
        if (plot_->item(i)->objectName() != "placeholder") plot_->removeItem(i);
    const char* gemms[] = {"fprop", "dgrad", "wgrad"};
    double x0 = INFINITY, x1 = -INFINITY, y0 = 0, y1 = 0;
    std::vector<const Fp8WorthRow*> shown;
    for (int g = 0; g < 3; ++g) {
        QCPGraph* graph = plot_->addGraph();
        graph->setName(gemms[g]);
        graph->setLineStyle(QCPGraph::lsNone);
        graph->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, series_color(g), 7));
        for (const Fp8WorthRow& r : w.rows) {
            if (static_cast<int>(r.gemm) != g || !std::isfinite(r.sqnr_db) || !std::isfinite(r.saved_us)) continue;
            graph->addData(r.sqnr_db, r.saved_us);
            x0 = std::min(x0, r.sqnr_db), x1 = std::max(x1, r.sqnr_db);
            y0 = std::min(y0, r.saved_us), y1 = std::max(y1, r.saved_us);
            shown.push_back(&r);
        }
    }
    auto* zero = new QCPItemStraightLine(plot_);
    zero->point1->setCoords(0, 0);
    zero->point2->setCoords(1, 0);
    zero->setPen(QPen(Qt::gray, 1, Qt::DashLine));
    if (x0 <= x1) {
        const double px = std::max(1.0, (x1 - x0) * 0.08), py = std::max(1.0, (y1 - y0) * 0.1);
        plot_->xAxis->setRange(x0 - px, x1 + 2 * px);  // room for the labels right of the points
        plot_->yAxis->setRange(y0 - py, y1 + py);
    }
    plot_->replot();  // lays the axes out: the labels below are placed in pixels
    // Labels: the GEMMs that save or cost the most first, each where it overlaps no label
    // already placed (points in a crowd keep theirs in the table and the tooltip).
    std::stable_sort(shown.begin(), shown.end(), [](const Fp8WorthRow* a, const Fp8WorthRow* b) {
        return std::abs(a->saved_us) > std::abs(b->saved_us);
    });
    QFont font(plot_->font().family(), 7);
    const QFontMetrics metrics(font);
    std::vector<QRectF> taken;
    for (const Fp8WorthRow* r : shown) {
        const QPointF at(plot_->xAxis->coordToPixel(r->sqnr_db), plot_->yAxis->coordToPixel(r->saved_us));
        const QRectF box(at + QPointF(5, -metrics.height() - 1), QSizeF(metrics.horizontalAdvance(r->label), metrics.height()));
        if (std::any_of(taken.begin(), taken.end(), [&](const QRectF& t) { return t.intersects(box); })) continue;
        taken.push_back(box);
        auto* label = new QCPItemText(plot_);
        label->position->setCoords(r->sqnr_db, r->saved_us);
        label->setPositionAlignment(Qt::AlignLeft | Qt::AlignBottom);
        label->setPadding(QMargins(5, 0, 0, 1));
        label->setText(r->label);
        label->setFont(font);
        label->setColor(series_color(static_cast<int>(r->gemm)).darker(140));
    }
    set_placeholder(plot_, w.rows.empty() || w.steps.empty() ? tr("no GEMM timed in both runs") : QString());
    plot_->replot();
}

}  // namespace fp8scope::views
