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
    t->horizontalHeader()->setStretchLastSection(false);  // right-aligned numbers stay by their header
    return t;
}
}  // namespace

ReportView::ReportView(ReportModel* model, QWidget* parent) : QWidget(parent), model_(model) {
    tensors_ = make_table(model->tensors(), this);
    stats_ = make_table(model->stats(), this);
    quantizers_ = make_table(model->quantizers(), this);
    title_ = new QLabel(this);
    title_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    title_->setSizePolicy(QSizePolicy::Preferred, QSizePolicy::Fixed);
    histogram_ = make_plot(this, tr("log2 |x| histogram"));
    histogram_->xAxis->setLabel(tr("floor(log2 |x|)"));
    histogram_->yAxis->setLabel(tr("elements"));
    auto* bars = new QCPBars(histogram_->xAxis, histogram_->yAxis);
    bars->setPen(Qt::NoPen);
    bars->setBrush(series_color(0));

    // The tensors on top; below, the selected tensor: its statistics beside its histogram,
    // then the quantizer table. Full width rows: the tables are wide.
    auto* selected = new QWidget(this);
    auto* column = new QVBoxLayout(selected);
    column->setContentsMargins(0, 0, 0, 0);
    column->addWidget(title_);
    auto* figures = new QSplitter(Qt::Horizontal, selected);
    figures->addWidget(stats_);
    figures->addWidget(histogram_);
    figures->setStretchFactor(1, 1);
    column->addWidget(figures, 1);
    auto* split = new QSplitter(Qt::Vertical, this);
    split->addWidget(tensors_);
    split->addWidget(selected);
    split->addWidget(quantizers_);
    split->setStretchFactor(0, 1);
    split->setStretchFactor(1, 3);
    split->setStretchFactor(2, 2);
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
