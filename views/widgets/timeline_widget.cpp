// Timeline painting and zoom/pan.
#include "widgets/timeline_widget.h"

#include <QHelpEvent>
#include <QMouseEvent>
#include <QPainter>
#include <QPainterPath>
#include <QToolTip>
#include <QWheelEvent>
#include <algorithm>
#include <cmath>

#include "widgets/plot_style.h"

namespace fp8scope::views {

namespace {
constexpr int kLaneHeight = 26, kAxisHeight = 22;
}

TimelineWidget::TimelineWidget(QWidget* parent) : QWidget(parent) {
    setMinimumHeight(kAxisHeight + 2 * kLaneHeight);
    setMouseTracking(true);  // flows follow the hovered box
}

void TimelineWidget::setBoxes(std::vector<TimelineBox> boxes, QStringList lanes, std::vector<int> launcher) {
    boxes_ = std::move(boxes);
    lanes_ = std::move(lanes);
    launcher_ = std::move(launcher);
    launcher_.resize(boxes_.size(), -1);
    hover_ = selected_ = -1;
    highlighting_ = std::any_of(boxes_.begin(), boxes_.end(), [](const TimelineBox& b) { return b.highlighted; });
    double end = 0;
    for (const auto& b : boxes_) end = std::max(end, b.end_us);
    const bool keep = total_us_ == std::max(end, 1.0) && view_end_ > view_start_;
    total_us_ = std::max(end, 1.0);
    label_width_ = labelWidth();
    if (!keep) resetView();
    setMinimumHeight(kAxisHeight + std::max<int>(2, lanes_.size()) * kLaneHeight);
    update();
}

void TimelineWidget::setHighlighted(const std::vector<bool>& on) {
    highlighting_ = false;
    for (std::size_t i = 0; i < boxes_.size(); ++i) {
        boxes_[i].highlighted = i < on.size() && on[i];
        highlighting_ = highlighting_ || boxes_[i].highlighted;
    }
    update();
}

void TimelineWidget::setView(double start_us, double end_us) {
    const double span = std::clamp(end_us - start_us, 1e-3, total_us_ * 1.05);
    view_start_ = std::clamp(start_us, -0.05 * total_us_, total_us_ - span * 0.1);
    view_end_ = view_start_ + span;
    update();
    emit viewChanged();
}

void TimelineWidget::selectBox(int box) {
    selected_ = box >= 0 && box < static_cast<int>(boxes_.size()) ? box : -1;
    update();
}

std::vector<std::pair<int, int>> TimelineWidget::shownFlows() const {
    std::vector<std::pair<int, int>> out;
    const int focus = focusBox();
    if (focus < 0 || focus >= static_cast<int>(launcher_.size())) return out;
    const int op = launcher_[static_cast<std::size_t>(focus)] >= 0 ? launcher_[static_cast<std::size_t>(focus)] : focus;
    for (std::size_t k = 0; k < launcher_.size(); ++k)
        if (launcher_[k] == op) out.emplace_back(op, static_cast<int>(k));
    return out;
}

QRectF TimelineWidget::boxRect(const TimelineBox& b) const {
    const double x0 = toX(b.start_us), x1 = std::max(toX(b.end_us), x0 + 1);
    return QRectF(x0, kAxisHeight + b.lane * kLaneHeight + 3, x1 - x0, kLaneHeight - 6);
}

void TimelineWidget::resetView() { setView(0, total_us_); }

void TimelineWidget::zoomTo(const TimelineBox& b) {
    const double pad = std::max((b.end_us - b.start_us) * 0.1, 1e-3);
    setView(b.start_us - pad, b.end_us + pad);
}

int TimelineWidget::labelWidth() const {
    int w = 60;
    for (const QString& l : lanes_) w = std::max(w, fontMetrics().horizontalAdvance(l) + 12);
    return w;
}

double TimelineWidget::toX(double us) const {
    return label_width_ + (us - view_start_) / (view_end_ - view_start_) * (width() - label_width_ - 4);
}
double TimelineWidget::toUs(double x) const {
    return view_start_ + (x - label_width_) / (width() - label_width_ - 4) * (view_end_ - view_start_);
}

void TimelineWidget::setNote(const QString& note) {
    if (note == note_) return;
    note_ = note;
    update();
}

void TimelineWidget::paintEvent(QPaintEvent*) {
    QPainter p(this);
    p.fillRect(rect(), Qt::white);
    if (boxes_.empty()) {
        p.setPen(Qt::gray);
        p.drawText(rect(), Qt::AlignCenter, note_.isEmpty() ? tr("no op or kernel records at this step") : note_);
        return;
    }
    // Time axis with about 8 ticks at round numbers.
    const double span = view_end_ - view_start_;
    const double raw = span / 8, mag = std::pow(10.0, std::floor(std::log10(raw)));
    const double tick = raw / mag < 2 ? 2 * mag : raw / mag < 5 ? 5 * mag : 10 * mag;
    p.setPen(QColor(0xcc, 0xcc, 0xcc));
    for (double t = std::ceil(view_start_ / tick) * tick; t <= view_end_; t += tick) {
        const int x = static_cast<int>(toX(t));
        p.drawLine(x, kAxisHeight, x, height());
        p.setPen(Qt::darkGray);
        p.drawText(QRect(x - 50, 2, 100, kAxisHeight - 4), Qt::AlignCenter, time_tick_label(t, span));
        p.setPen(QColor(0xcc, 0xcc, 0xcc));
    }
    for (int l = 0; l < lanes_.size(); ++l) {
        const int y = kAxisHeight + l * kLaneHeight;
        p.setPen(Qt::black);
        p.drawText(QRect(4, y, label_width_ - 8, kLaneHeight), Qt::AlignVCenter | Qt::AlignLeft, lanes_[l]);
    }
    p.setClipRect(QRect(label_width_, kAxisHeight, width() - label_width_, height() - kAxisHeight));
    for (const auto& b : boxes_) {
        const QRectF r = boxRect(b);
        if (r.right() < label_width_ || r.left() > width()) continue;
        QColor c = b.fill.isValid() ? b.fill : series_color(b.color + 1).lighter(130);
        if (highlighting_ && !b.highlighted) c.setAlpha(50);
        p.fillRect(r, c);
        p.setPen(highlighting_ && b.highlighted ? QPen(Qt::black, 2) : QPen(c.darker(150)));
        p.drawRect(r);
        if (r.width() > 30) {
            p.setPen(Qt::black);
            // Elided to the box, so that a long kernel name never runs into its neighbour.
            const QRectF t = r.adjusted(2, 0, -2, 0);
            p.drawText(t, Qt::AlignVCenter | Qt::AlignLeft, p.fontMetrics().elidedText(b.name, Qt::ElideRight, static_cast<int>(t.width())));
        }
    }
    // Flows: from the op's start to each launched kernel's start, an arrow on the kernel.
    const auto flows = shownFlows();
    if (!flows.empty()) {
        p.setRenderHint(QPainter::Antialiasing);
        const QColor ink(0x20, 0x30, 0x90, 200);
        const QRectF op = boxRect(boxes_[static_cast<std::size_t>(flows.front().first)]);
        p.setPen(QPen(Qt::black, 2));
        p.setBrush(Qt::NoBrush);
        p.drawRect(op);
        for (const auto& [from, to] : flows) {
            const QRectF k = boxRect(boxes_[static_cast<std::size_t>(to)]);
            const bool down = k.top() >= op.bottom();
            const QPointF a(op.left(), down ? op.bottom() : op.top()), z(k.left(), down ? k.top() : k.bottom());
            QPainterPath path(a);
            const double bend = (z.y() - a.y()) * 0.5;
            path.cubicTo(a + QPointF(0, bend), z - QPointF(0, bend), z);
            p.setPen(QPen(ink, 1.2));
            p.drawPath(path);
            p.setBrush(ink);
            const double tip = down ? -5 : 5;
            p.drawPolygon(QPolygonF({z, z + QPointF(-3, tip), z + QPointF(3, tip)}));
            p.setBrush(Qt::NoBrush);
            p.setPen(QPen(ink, 1.5));
            p.drawRect(k);
        }
        p.setRenderHint(QPainter::Antialiasing, false);
    }
    if (!note_.isEmpty()) {
        p.setClipping(false);
        const QRect box = rect().adjusted(label_width_ + 4, kAxisHeight + 2, -4, -4);
        const QRect text = p.fontMetrics().boundingRect(box, Qt::AlignRight | Qt::AlignBottom | Qt::TextWordWrap, note_);
        p.fillRect(text.adjusted(-4, -2, 4, 2), QColor(255, 248, 220, 230));
        p.setPen(Qt::darkGray);
        p.drawText(box, Qt::AlignRight | Qt::AlignBottom | Qt::TextWordWrap, note_);
    }
}

void TimelineWidget::wheelEvent(QWheelEvent* e) {
    const double at = toUs(e->position().x());
    const double factor = e->angleDelta().y() > 0 ? 0.8 : 1.25;
    setView(at - (at - view_start_) * factor, at + (view_end_ - at) * factor);
    e->accept();
}

void TimelineWidget::mousePressEvent(QMouseEvent* e) {
    drag_x_ = static_cast<int>(e->position().x());
    drag_start_ = view_start_;
    if (e->button() == Qt::RightButton) resetView();
    // A click on a box keeps its flows drawn; a click beside the boxes lets them go.
    if (e->button() == Qt::LeftButton) selectBox(indexAt(e->position().toPoint()));
}

void TimelineWidget::mouseMoveEvent(QMouseEvent* e) {
    if (!(e->buttons() & Qt::LeftButton)) {
        const int at = indexAt(e->position().toPoint());
        if (at != hover_) {
            hover_ = at;
            if (selected_ < 0) update();
        }
        return;
    }
    const double span = view_end_ - view_start_;
    const double shift = (e->position().x() - drag_x_) / (width() - label_width_ - 4) * span;
    setView(drag_start_ - shift, drag_start_ - shift + span);
}

void TimelineWidget::mouseDoubleClickEvent(QMouseEvent* e) {
    if (const TimelineBox* b = boxAt(e->position().toPoint())) zoomTo(*b);
}

int TimelineWidget::indexAt(QPoint pos) const {
    const TimelineBox* b = boxAt(pos);
    return b ? static_cast<int>(b - boxes_.data()) : -1;
}

const TimelineBox* TimelineWidget::boxAt(QPoint pos) const {
    if (pos.y() < kAxisHeight) return nullptr;
    const int lane = (pos.y() - kAxisHeight) / kLaneHeight;
    const double us = toUs(pos.x());
    const double slack = (view_end_ - view_start_) / std::max(1, width()) * 2;
    for (const auto& b : boxes_)
        if (b.lane == lane && us >= b.start_us - slack && us <= b.end_us + slack) return &b;
    return nullptr;
}

bool TimelineWidget::event(QEvent* e) {
    if (e->type() == QEvent::Leave && hover_ >= 0) {
        hover_ = -1;
        update();
    }
    if (e->type() == QEvent::ToolTip) {
        auto* help = static_cast<QHelpEvent*>(e);
        if (const TimelineBox* b = boxAt(help->pos()))
            QToolTip::showText(help->globalPos(), QStringLiteral("%1%4\n%2 us at %3 us").arg(b->name)
                                                      .arg(b->end_us - b->start_us, 0, 'g', 4).arg(b->start_us, 0, 'g', 6)
                                                      .arg(b->detail.isEmpty() ? QString() : "\n" + b->detail));
        else
            QToolTip::hideText();
        return true;
    }
    return QWidget::event(e);
}

}  // namespace fp8scope::views
