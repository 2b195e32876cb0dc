// Report view.
#include "widgets/report_view.h"

#include <QHeaderView>
#include <QLabel>
#include <QSplitter>
#include <QTableView>
#include <QVBoxLayout>
#include <qcustomplot.h>

#include "models/report_model.h"
#include "widgets/plot_style.h"

namespace fp8scope::views {

namespace {
QTableView* make_table(QAbstractItemModel* model, QWidget* parent) {
    auto* t = new QTableView(parent);
    t->setModel(model);
    t->setSelectionBehavior(QAbstractItemView::SelectRows);
    t->setSelectionMode(QAbstractItemView::SingleSelection);
    t->setEditTriggers(QAbstractItemView::NoEditTriggers);
    t->verticalHeader()->hide();
    t->verticalHeader()->setDefaultSectionSize(t->fontMetrics().height() + 6);
    t->horizontalHeader()->setStretchLastSection(true);
    return t;
}
}  // namespace

ReportView::ReportView(ReportModel* model, QWidget* parent) : QWidget(parent), model_(model) {
    tensors_ = make_table(model->tensors(), this);
    stats_ = make_table(model->stats(), this);
    quantizers_ = make_table(model->quantizers(), this);
    title_ = new QLabel(this);
    title_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    histogram_ = make_plot(this, tr("log2 |x| histogram"));
    histogram_->xAxis->setLabel(tr("floor(log2 |x|)"));
    histogram_->yAxis->setLabel(tr("elements"));
    auto* bars = new QCPBars(histogram_->xAxis, histogram_->yAxis);
    bars->setPen(Qt::NoPen);
    bars->setBrush(series_color(0));

    // Left: the tensors. Right: the selected tensor, statistics beside its histogram
    // above the quantizer table.
    auto* right = new QWidget(this);
    auto* column = new QVBoxLayout(right);
    column->setContentsMargins(0, 0, 0, 0);
    column->addWidget(title_);
    auto* rows = new QSplitter(Qt::Vertical, right);
    auto* top = new QSplitter(Qt::Horizontal, rows);
    top->addWidget(stats_);
    top->addWidget(histogram_);
    top->setStretchFactor(1, 2);
    rows->addWidget(top);
    rows->addWidget(quantizers_);
    column->addWidget(rows);
    auto* split = new QSplitter(Qt::Horizontal, this);
    split->addWidget(tensors_);
    split->addWidget(right);
    split->setStretchFactor(0, 1);
    split->setStretchFactor(1, 1);
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(4, 4, 4, 4);
    layout->addWidget(split);

    connect(tensors_->selectionModel(), &QItemSelectionModel::currentRowChanged, this,
            [this](const QModelIndex& current) { model_->setTensor(current.isValid() ? current.row() : -1); });
    connect(model, &ReportModel::tensorChanged, this, &ReportView::showTensor);
    showTensor(model->tensor());
}

void ReportView::showTensor(int index) {
    if (index >= 0 && tensors_->currentIndex().row() != index) tensors_->selectRow(index);
    const bool any = index >= 0;
    title_->setText(any ? tr("<b>%1</b> &nbsp; %2")
                              .arg(model_->tensors()->index(index, ReportTensorsModel::Name).data().toString().toHtmlEscaped(),
                                   QString::fromStdString(model_->report().tensors[index].file).toHtmlEscaped())
                        : tr("no tensor"));
    for (QTableView* t : {tensors_, stats_, quantizers_}) t->resizeColumnsToContents();
    QVector<double> keys, counts;
    for (const auto& [exponent, count] : model_->histogram()) {
        keys << exponent;
        counts << double(count);
    }
    qobject_cast<QCPBars*>(histogram_->plottable(0))->setData(keys, counts, true);
    fit_axes(histogram_);
    histogram_->replot();
}

}  // namespace fp8scope::views
