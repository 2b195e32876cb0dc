// Layers table view.
#include "layers_view.h"

#include <QHeaderView>
#include <QLineEdit>
#include <QSortFilterProxyModel>
#include <QTableView>
#include <QVBoxLayout>

#include "model_roles.h"

namespace fp8scope::views {

LayersView::LayersView(const ViewContext& context, QWidget* parent)
    : StoreView(context, "layers", tr("Layers"), parent), model_(context.store) {
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    filter_ = new QLineEdit(this);
    filter_->setPlaceholderText(tr("filter: linear, gemm, operand or recipe (e.g. mlp, dgrad)"));
    filter_->setClearButtonEnabled(true);
    proxy_ = new QSortFilterProxyModel(this);
    proxy_->setSourceModel(&model_);
    proxy_->setSortRole(kValueRole);
    proxy_->setFilterKeyColumn(-1);
    proxy_->setFilterCaseSensitivity(Qt::CaseInsensitive);
    view_ = new QTableView(this);
    view_->setModel(proxy_);
    view_->setSortingEnabled(true);
    view_->sortByColumn(-1, Qt::AscendingOrder);
    view_->setSelectionBehavior(QAbstractItemView::SelectRows);
    view_->setSelectionMode(QAbstractItemView::SingleSelection);
    view_->verticalHeader()->hide();
    view_->horizontalHeader()->setSectionResizeMode(QHeaderView::Interactive);
    layout->addWidget(filter_);
    layout->addWidget(view_);
    connect(filter_, &QLineEdit::textChanged, proxy_, &QSortFilterProxyModel::setFilterFixedString);
    connect(view_->selectionModel(), &QItemSelectionModel::currentRowChanged, this, [this](const QModelIndex& i) {
        if (i.isValid()) ctx().selection->setOperand(model_.operandAt(proxy_->mapToSource(i).row()));
    });
    connect(context.selection, &Selection::changed, this, &LayersView::showSelection);
}

void LayersView::showSelection() {
    const int row = model_.rowOf(ctx().selection->operand());
    if (row < 0) return;
    const QModelIndex i = proxy_->mapFromSource(model_.index(row, 0));
    if (i.isValid() && view_->currentIndex().row() != i.row())
        view_->selectionModel()->setCurrentIndex(i, QItemSelectionModel::ClearAndSelect | QItemSelectionModel::Rows);
}

void LayersView::redraw() {
    const bool first = model_.rowCount() == 0;
    model_.refresh(ctx().selection->run(), ctx().cursor->step());
    if (first && model_.rowCount() > 0) {
        view_->resizeColumnsToContents();
        showSelection();
    }
}

}  // namespace fp8scope::views
