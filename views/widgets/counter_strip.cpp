// Counter rows painted on the timeline's axis.
#include "widgets/counter_strip.h"

#include <QPainter>
#include <algorithm>
#include <cmath>

#include "widgets/plot_style.h"
#include "widgets/timeline_widget.h"

namespace fp8scope::views {

namespace {
constexpr int kRow = 20;
}

CounterStrip::CounterStrip(const TimelineWidget* timeline, QWidget* parent) : QWidget(parent), timeline_(timeline) {
    connect(timeline, &TimelineWidget::viewChanged, this, qOverload<>(&QWidget::update));
    setFixedHeight(0);
}

void CounterStrip::setTracks(std::vector<StripTrack> tracks) {
    tracks_ = std::move(tracks);
    setFixedHeight(static_cast<int>(tracks_.size()) * kRow + (tracks_.empty() ? 0 : 4));
    update();
}

void CounterStrip::paintEvent(QPaintEvent*) {
    QPainter p(this);
    p.fillRect(rect(), QColor(0xfa, 0xfa, 0xfa));
    const int left = timeline_->labelWidthPx(), right = width() - 4;
    const double end_us = timeline_->viewEnd();
    for (std::size_t t = 0; t < tracks_.size(); ++t) {
        const StripTrack& track = tracks_[t];
        const int y = 2 + static_cast<int>(t) * kRow;
        const QColor c = series_color(static_cast<int>(t));
        double lo = INFINITY, hi = -INFINITY;
        for (const auto& [us, v] : track.points)
            if (std::isfinite(v)) lo = std::min(lo, v), hi = std::max(hi, v);
        p.setPen(Qt::black);
        p.drawText(QRect(4, y, left - 8, kRow), Qt::AlignVCenter | Qt::AlignLeft,
                   p.fontMetrics().elidedText(track.name, Qt::ElideMiddle, left - 8));
        p.setPen(QColor(0xe0, 0xe0, 0xe0));
        p.drawLine(left, y + kRow - 1, right, y + kRow - 1);
        if (!(lo <= hi)) continue;
        const auto yOf = [&](double v) { return hi > lo ? y + kRow - 3 - (v - lo) / (hi - lo) * (kRow - 6) : y + kRow / 2.0; };
        p.save();
        p.setClipRect(QRect(left, y, right - left, kRow));
        p.setPen(QPen(c, 1.5));
        for (std::size_t i = 0; i < track.points.size(); ++i) {
            const auto [us, v] = track.points[i];
            if (!std::isfinite(v)) continue;
            const double next = i + 1 < track.points.size() ? track.points[i + 1].first : std::max(end_us, us);
            const double x0 = timeline_->xOf(us), x1 = timeline_->xOf(next);
            p.drawLine(QPointF(x0, yOf(v)), QPointF(x1, yOf(v)));
            if (i + 1 < track.points.size() && std::isfinite(track.points[i + 1].second))
                p.drawLine(QPointF(x1, yOf(v)), QPointF(x1, yOf(track.points[i + 1].second)));
        }
        p.restore();
        const double last = track.points.back().second;
        const QString value = QString::number(last, 'g', 4);
        const QRect text(right - p.fontMetrics().horizontalAdvance(value) - 6, y + 1, p.fontMetrics().horizontalAdvance(value) + 4, kRow - 2);
        p.fillRect(text, QColor(0xfa, 0xfa, 0xfa, 230));
        p.setPen(c.darker(130));
        p.drawText(text, Qt::AlignCenter, value);
    }
}

}  // namespace fp8scope::views
