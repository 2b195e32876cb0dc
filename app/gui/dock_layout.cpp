// Dock arrangement and its persistence.
#include "dock_layout.h"

#include <QDockWidget>
#include <QMainWindow>
#include <QMenu>
#include <QSettings>

#include "widgets/store_view.h"

using fp8scope::views::StoreView;

namespace {
bool is_table(const QString& name) { return name == "layers" || name == "events" || name == "kernels"; }
}  // namespace

DockLayout::DockLayout(QMainWindow* window, const std::vector<StoreView*>& views) : QObject(window), window_(window) {
    // Plots left and right, tables below; each dock can be moved, tabbed or closed.
    QDockWidget* previous[2] = {nullptr, nullptr};
    for (StoreView* v : views) {
        auto* dock = new QDockWidget(v->title(), window);
        dock->setObjectName("dock_" + v->name());
        dock->setWidget(v);
        const bool table = is_table(v->name());
        QDockWidget*& prev = previous[table ? 1 : 0];
        if (prev) window->tabifyDockWidget(prev, dock);
        else window->addDockWidget(table ? Qt::BottomDockWidgetArea : Qt::RightDockWidgetArea, dock);
        prev = dock;
    }
    if (auto* first = window->findChild<QDockWidget*>("dock_loss")) first->raise();
    if (auto* layers = window->findChild<QDockWidget*>("dock_layers")) layers->raise();
    default_state_ = window->saveState();
}

void DockLayout::restoreSaved() {
    QSettings settings;
    window_->restoreGeometry(settings.value("window/geometry").toByteArray());
    const QByteArray state = settings.value("window/state").toByteArray();
    if (empty_) shown_state_ = state;
    else window_->restoreState(state);
}

void DockLayout::save() const {
    QSettings settings;
    settings.setValue("window/geometry", window_->saveGeometry());
    settings.setValue("window/state", empty_ ? shown_state_ : window_->saveState());
}

void DockLayout::reset() {
    if (empty_) shown_state_ = default_state_;
    else window_->restoreState(default_state_);
}

void DockLayout::setEmpty(bool empty) {
    if (empty == empty_) return;
    empty_ = empty;
    if (empty) {
        shown_state_ = window_->saveState();
        for (QDockWidget* d : window_->findChildren<QDockWidget*>()) d->hide();
    } else {
        window_->restoreState(shown_state_);
    }
}

void DockLayout::fillMenu(QMenu* menu) {
    for (QDockWidget* d : window_->findChildren<QDockWidget*>()) menu->addAction(d->toggleViewAction());
    menu->addSeparator();
    menu->addAction(tr("&Reset layout"), this, &DockLayout::reset);
}
