// Base view: visibility-aware refresh and image export.
#include "widgets/store_view.h"

#include <QPainter>
#include <QPdfWriter>
#include <QPixmap>

namespace fp8scope::views {

StoreView::StoreView(const ViewContext& ctx, const QString& name, const QString& title, QWidget* parent)
    : QWidget(parent), ctx_(ctx), title_(title) {
    setObjectName(name);
}

bool StoreView::onScreen() const {
    // A dock tabbed behind another stays visible, moved off its window.
    if (!isVisible()) return false;
    const QWidget* w = window();
    return w == this || w->rect().intersects(QRect(mapTo(w, QPoint(0, 0)), size()));
}

void StoreView::redrawIfStale() {
    if (stale_) refresh(true);
}

void StoreView::refresh(bool force) {
    if (!force && !onScreen()) {
        stale_ = true;  // drawn when shown
        return;
    }
    const auto rev = ctx_.store->revision();
    data_changed_ = rev != seen_revision_;
    seen_revision_ = rev;
    stale_ = false;
    redraw();
}

void StoreView::showEvent(QShowEvent* e) {
    QWidget::showEvent(e);
    if (stale_) refresh(true);
}

bool StoreView::exportImage(const QString& path, QString* error) const {
    bool ok = false;
    if (path.endsWith(".pdf", Qt::CaseInsensitive)) {
        QPdfWriter pdf(path);
        pdf.setPageSize(QPageSize(QSizeF(width(), height()), QPageSize::Point));
        pdf.setPageMargins({});
        pdf.setResolution(72);
        QPainter p;
        ok = p.begin(&pdf);
        if (ok) const_cast<StoreView*>(this)->render(&p);
    } else {
        ok = const_cast<StoreView*>(this)->grab().save(path);
    }
    if (!ok && error) *error = QStringLiteral("%1: cannot write the image").arg(path);
    return ok;
}

}  // namespace fp8scope::views
