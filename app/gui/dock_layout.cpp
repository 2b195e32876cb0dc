// Dock arrangement and its persistence.
#include "dock_layout.h"

#include <QDockWidget>
#include <QLayout>
#include <QMainWindow>
#include <QMenu>
#include <QSettings>
#include <QTimer>

#include "widgets/store_view.h"

using fp8scope::views::StoreView;

namespace {
// The tables that go in the band below. The Kernels view, a timeline over its table, is
// an analysis view: it needs the height the band does not have.
bool is_table(const QString& name) { return name == "layers" || name == "events" || name == "findings"; }
}  // namespace

DockLayout::DockLayout(QMainWindow* window, const std::vector<StoreView*>& views) : QObject(window), window_(window) {
    // Plots on top, tables below; each dock can be moved, tabbed or closed.
    QDockWidget* previous[2] = {nullptr, nullptr};
    for (StoreView* v : views) {
        auto* dock = new QDockWidget(v->title(), window);
        dock->setObjectName("dock_" + v->name());
        dock->setWidget(v);
        // A view behind another tab skips redraws; brought to the front, it catches up.
        connect(dock, &QDockWidget::visibilityChanged, v, [v](bool shown) {
            if (shown) QTimer::singleShot(0, v, &StoreView::redrawIfStale);  // once the dock is laid out
        });
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

bool DockLayout::restoreSaved() {
    QSettings settings;
    const bool placed = window_->restoreGeometry(settings.value("window/geometry").toByteArray());
    const QByteArray state = settings.value("window/state").toByteArray();
    if (state.isEmpty()) return placed;
    default_sizes_ = false;
    if (empty_) shown_state_ = state;
    else window_->restoreState(state);
    return placed;
}

void DockLayout::save() const {
    QSettings settings;
    settings.setValue("window/geometry", window_->saveGeometry());
    settings.setValue("window/state", empty_ ? shown_state_ : window_->saveState());
}

void DockLayout::reset() {
    default_sizes_ = true;
    if (empty_) {
        shown_state_ = default_state_;
        return;
    }
    window_->restoreState(default_state_);
    fitDefaultSizes();
}

void DockLayout::fitDefaultSizes() {
    QDockWidget* plots = window_->findChild<QDockWidget*>("dock_loss");
    QDockWidget* tables = window_->findChild<QDockWidget*>("dock_layers");
    if (!plots || !tables) return;
    window_->layout()->activate();  // the docks' heights after restoreState(), now
    const int h = plots->height() + tables->height();
    if (h <= 0) return;
    const int table_h = static_cast<int>(kTableShare * h);
    window_->resizeDocks({plots, tables}, {std::max(1, h - table_h), table_h}, Qt::Vertical);
}

bool DockLayout::raise(const QString& name) {
    auto* dock = window_->findChild<QDockWidget*>("dock_" + name);
    if (dock) dock->raise();
    return dock != nullptr;
}

void DockLayout::setEmpty(bool empty) {
    if (empty == empty_) return;
    empty_ = empty;
    if (empty) {
        shown_state_ = window_->saveState();
        for (QDockWidget* d : window_->findChildren<QDockWidget*>()) d->hide();
    } else {
        window_->restoreState(shown_state_);
        if (default_sizes_) fitDefaultSizes();
    }
}

void DockLayout::fillMenu(QMenu* menu) {
    for (QDockWidget* d : window_->findChildren<QDockWidget*>()) menu->addAction(d->toggleViewAction());
    menu->addSeparator();
    menu->addAction(tr("&Reset layout"), this, &DockLayout::reset);
}
