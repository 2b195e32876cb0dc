// Events view.
#include "widgets/events_view.h"

#include <QHeaderView>
#include <QTableView>
#include <QVBoxLayout>

#include "models/model_roles.h"

namespace fp8scope::views {

EventsView::EventsView(const ViewContext& context, QWidget* parent)
    : StoreView(context, "events", tr("Events"), parent), model_(context.store) {
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    view_ = new QTableView(this);
    view_->setModel(&model_);
    view_->setSelectionBehavior(QAbstractItemView::SelectRows);
    view_->verticalHeader()->hide();
    view_->horizontalHeader()->setStretchLastSection(true);
    view_->setToolTip(tr("double-click or Enter: move the step cursor to the event"));
    layout->addWidget(view_);
    connect(view_, &QTableView::activated, this, [this](const QModelIndex& i) { jumpTo(i.row()); });
}

void EventsView::jumpTo(int row) {
    const QVariant step = model_.data(model_.index(row, 0), kStepRole);
    if (step.isValid()) ctx().cursor->setStep(step.toLongLong());
}

void EventsView::redraw() {
    // Events only change with the store; cursor moves need no work here.
    if (dataChanged()) model_.refresh();
}

}  // namespace fp8scope::views
