// Findings view.
#include "widgets/findings_view.h"

#include <QHeaderView>
#include <QLabel>
#include <QPlainTextEdit>
#include <QSplitter>
#include <QTableView>
#include <QVBoxLayout>
#include <qcustomplot.h>
#include <algorithm>
#include <chrono>

#include "widgets/plot_style.h"

namespace fp8scope::views {
namespace {

// A growing trace is diagnosed again after this many store updates (each a batch of steps
// or a live poll), so a long run's findings follow it without running diagnose every poll.
constexpr std::uint64_t kUpdatesPerRediagnosis = 20;
constexpr int kMaxColumnWidth = 560;

}  // namespace

FindingsView::FindingsView(const ViewContext& context, QWidget* parent)
    : StoreView(context, "findings", tr("Findings"), parent) {
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    headline_ = new QLabel(tr("no trace diagnosed"), this);
    layout->addWidget(headline_);
    auto* split = new QSplitter(Qt::Vertical, this);
    table_ = new QTableView(split);
    table_->setModel(&model_);
    table_->setSelectionBehavior(QAbstractItemView::SelectRows);
    table_->setSelectionMode(QAbstractItemView::SingleSelection);
    table_->setWordWrap(false);
    table_->verticalHeader()->hide();
    table_->horizontalHeader()->setStretchLastSection(true);
    table_->setToolTip(tr("double-click or Enter: show the finding in its view, at its run, step and operand"));
    details_ = new QPlainTextEdit(split);
    details_->setReadOnly(true);
    attribution_ = make_plot(split, tr("attribute: loss gap recovered by each group in high precision"));
    attribution_->setMinimumHeight(4 * fontMetrics().height());
    attribution_->hide();
    // The band of tables below the plots is short: the view fits it as the others do.
    table_->setMinimumHeight(3 * fontMetrics().height());
    details_->setMinimumHeight(2 * fontMetrics().height());
    split->setStretchFactor(0, 3);
    split->setStretchFactor(1, 1);
    split->setStretchFactor(2, 2);
    layout->addWidget(split);
    connect(table_, &QTableView::activated, this, [this](const QModelIndex& i) { jumpTo(i.row()); });
    connect(table_->selectionModel(), &QItemSelectionModel::currentRowChanged, this,
            [this](const QModelIndex& i) { showDetails(i.row()); });
    poll_.setInterval(50);
    connect(&poll_, &QTimer::timeout, this, &FindingsView::collect);
}

FindingsView::~FindingsView() {
    if (job_.valid()) job_.wait();
}

void FindingsView::setTracePath(const QString& path) {
    path_ = path;
    grown_ = 0;
    if (path_.isEmpty()) {
        model_.setFindings({});
        drawAttribution();
        headline_->setText(tr("no trace file to diagnose"));
        return;
    }
    start();
}

void FindingsView::start() {
    if (job_.valid()) {  // one diagnosis at a time; the newest file state follows
        again_ = true;
        return;
    }
    headline_->setText(tr("diagnosing %1 ...").arg(path_));
    job_ = std::async(std::launch::async, [path = path_.toStdString()] { return diagnose_file(path); });
    poll_.start();
}

void FindingsView::collect() {
    if (!job_.valid() || job_.wait_for(std::chrono::seconds(0)) != std::future_status::ready) return;
    poll_.stop();
    try {
        DiagnosedTrace d = job_.get();
        // A large trace's per-step findings come from its newest steps: the headline says so.
        const QString covered = d.detail_from == INT64_MIN
                                    ? QString()
                                    : tr(" (a large trace: per-step findings from step %1 on, capture steps whole)").arg(d.detail_from);
        model_.setFindings(std::move(d));
        headline_->setText(tr("%1 in %2").arg(model_.headline(), path_) + covered);
        table_->resizeColumnsToContents();
        // A long summary or fix keeps its own column readable without pushing the others
        // off screen; the whole text is in the tooltip and the details below.
        for (int c = 0; c < FindingsModel::kColumns; ++c)
            table_->setColumnWidth(c, std::min(table_->columnWidth(c), kMaxColumnWidth));
        if (model_.rowCount() > 0) table_->selectRow(0);
        else details_->clear();
        drawAttribution();
    } catch (const std::exception& e) {
        job_ = {};
        model_.setFindings({});
        drawAttribution();
        headline_->setText(tr("cannot diagnose %1: %2").arg(path_, QString::fromUtf8(e.what())));
    }
    if (again_) {
        again_ = false;
        start();
    }
}

bool FindingsView::waitForFindings(int timeout_ms) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (job_.valid()) {
        if (job_.wait_until(until) != std::future_status::ready) return false;
        collect();
    }
    return true;
}

void FindingsView::drawAttribution() {
    const auto& rows = model_.attribution();
    attribution_->setVisible(!rows.empty());
    attribution_->clearPlottables();
    if (rows.empty()) return;
    // One horizontal bar per group, the best on top; the chosen set in colour.
    auto* chosen = new QCPBars(attribution_->yAxis, attribution_->xAxis);
    auto* others = new QCPBars(attribution_->yAxis, attribution_->xAxis);
    chosen->setName(tr("chosen (the verified set)"));
    others->setName(tr("not chosen"));
    chosen->setBrush(series_color(1));
    others->setBrush(QColor(0xb0, 0xb0, 0xb0));
    chosen->setPen(Qt::NoPen);
    others->setPen(Qt::NoPen);
    QSharedPointer<QCPAxisTickerText> ticker(new QCPAxisTickerText);
    const int n = static_cast<int>(rows.size());
    for (int i = 0; i < n; ++i) {
        const auto& r = rows[std::size_t(i)];
        const double at = n - i;  // rank 1 at the top
        (r.chosen ? chosen : others)->addData(at, 100.0 * r.recovered);
        ticker->addTick(at, QString::fromStdString(r.group));
    }
    attribution_->yAxis->setTicker(ticker);
    attribution_->yAxis->setRange(0.5, n + 0.5);
    attribution_->xAxis->setLabel(tr("% of the recipe's loss gap recovered"));
    double lo = 0, hi = 100;
    for (const auto& r : rows) lo = std::min(lo, 100.0 * r.recovered), hi = std::max(hi, 100.0 * r.recovered);
    attribution_->xAxis->setRange(lo, hi * 1.05);
    attribution_->legend->setVisible(true);
    place_legend_below(attribution_, 2);
    // A readable row per group, up to a third of a screen.
    attribution_->setMinimumHeight(std::min(400, (n + 4) * (fontMetrics().height() + 4)));
    attribution_->replot();
}

void FindingsView::showDetails(int row) {
    details_->setPlainText(row >= 0 && row < model_.rowCount() ? model_.details(row) : QString());
}

void FindingsView::jumpTo(int row) {
    if (row < 0 || row >= model_.rowCount()) return;
    const FindingTarget t = finding_target(model_.finding(row));
    if (t.run >= 0) ctx().selection->setRun(t.run);
    if (t.operand) ctx().selection->setOperand(*t.operand);
    if (t.step >= 0) ctx().cursor->setStep(t.step);
    emit showView(t.view);
}

void FindingsView::redraw() {
    // A followed trace grows: diagnose it again now and then.
    if (dataChanged() && !path_.isEmpty() && ++grown_ >= kUpdatesPerRediagnosis) {
        grown_ = 0;
        start();
    }
}

}  // namespace fp8scope::views
