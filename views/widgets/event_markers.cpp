// Event markers on step plots.
#include "widgets/event_markers.h"

#include <qcustomplot.h>

namespace fp8scope::views {

namespace {
constexpr char kMarker[] = "event_marker";
constexpr char kLabel[] = "event_marker_label";
constexpr int kMaxLabels = 12;  // past this many the labels would cover each other; lines only

QCPLayer* events_layer(QCustomPlot* plot) {
    if (QCPLayer* l = plot->layer("events")) return l;
    plot->addLayer("events", plot->layer("main"), QCustomPlot::limBelow);
    return plot->layer("events");
}

QColor event_color(EventKind k) {
    switch (k) {
        case EventKind::NonFinite:
        case EventKind::FirstNonFinite:
        case EventKind::CheckpointSkipped:  // a NaN/Inf kept it from being written
        case EventKind::Error: return QColor(200, 0, 0);
        case EventKind::Injection: return QColor(120, 60, 0);  // a fault put there on purpose
        case EventKind::Rewind:
        case EventKind::LossSpike: return QColor(230, 120, 0);
        case EventKind::RecipeSwitch: return QColor(0, 110, 200);
        case EventKind::Health: return QColor(150, 40, 170);  // a rank slow, recovered or lost
        case EventKind::ScalingMismatch: return QColor(200, 0, 130);  // ranks' scaling state apart
        case EventKind::WorldChanged: return QColor(160, 80, 0);      // an elastic job lost a rank
        default: return QColor(120, 120, 120);
    }
}

// Places the labels of `rect` by event_label_side() for the step axis' current range.
void place_labels(QCustomPlot* plot, QCPAxisRect* rect) {
    const QCPRange r = rect->axis(QCPAxis::atBottom)->range();
    for (int i = 0; i < plot->itemCount(); ++i)
        if (auto* t = qobject_cast<QCPItemText*>(plot->item(i)); t && t->clipAxisRect() == rect && t->objectName() == kLabel) {
            const Qt::Alignment side = event_label_side(t->position->key(), r.lower, r.upper);
            t->setVisible(side != 0);
            if (side) t->setPositionAlignment(side | Qt::AlignTop);
        }
}

// The labels follow zooming and panning (once per step axis).
void follow_range(QCustomPlot* plot, QCPAxisRect* rect) {
    QCPAxis* x = rect->axis(QCPAxis::atBottom);
    if (x->property(kLabel).toBool()) return;
    x->setProperty(kLabel, true);
    QObject::connect(x, qOverload<const QCPRange&>(&QCPAxis::rangeChanged), plot, [plot, rect] { place_labels(plot, rect); });
}
}  // namespace

Qt::Alignment event_label_side(double step, double lower, double upper) {
    if (step < lower || step > upper || !(upper > lower)) return {};
    return step <= lower + 0.6 * (upper - lower) ? Qt::AlignLeft : Qt::AlignRight;
}

bool marked_on_plots(EventKind k) {
    return k != EventKind::Start && k != EventKind::End && k != EventKind::Pause && k != EventKind::Resume;
}

void mark_events(QCustomPlot* plot, const TraceData& d, int run, QCPAxisRect* rect) {
    rect = rect ? rect : plot->axisRect();
    for (int i = plot->itemCount() - 1; i >= 0; --i)
        if (QCPAbstractItem* it = plot->item(i); it->objectName().startsWith(kMarker) && it->clipAxisRect() == rect)
            plot->removeItem(it);
    QCPAxis *x = rect->axis(QCPAxis::atBottom), *y = rect->axis(QCPAxis::atLeft);
    int labels = 0;
    for (const trace::EventRecord& e : d.events) {
        if (!marked_on_plots(e.kind) || (run >= 0 && e.run >= 0 && e.run != run)) continue;
        const QColor color = event_color(e.kind);
        auto* line = new QCPItemStraightLine(plot);
        line->setObjectName(kMarker);
        line->setLayer(events_layer(plot));
        line->setClipAxisRect(rect);
        line->setSelectable(false);
        for (auto* p : {line->point1, line->point2}) {
            p->setAxes(x, y);
            p->setTypeY(QCPItemPosition::ptAxisRectRatio);
            p->setAxisRect(rect);
        }
        line->point1->setCoords(static_cast<double>(e.step), 0);
        line->point2->setCoords(static_cast<double>(e.step), 1);
        line->setPen(QPen(color, 1, Qt::DotLine));
        if (labels++ >= kMaxLabels) continue;
        auto* text = new QCPItemText(plot);
        text->setObjectName(kLabel);
        text->setLayer(events_layer(plot));
        text->setClipAxisRect(rect);
        text->setSelectable(false);
        text->position->setAxes(x, y);
        text->position->setAxisRect(rect);
        text->position->setTypeY(QCPItemPosition::ptAxisRectRatio);
        // Three rows, so that the labels of neighbouring events do not cover each other.
        text->position->setCoords(static_cast<double>(e.step), 0.02 + 0.09 * ((labels - 1) % 3));
        text->setText(QString::fromLatin1(event_kind_name(e.kind)));
        text->setColor(color);
        QFont f = text->font();
        f.setPointSize(7);
        text->setFont(f);
    }
    place_labels(plot, rect);
    follow_range(plot, rect);
}

int event_marker_count(const QCustomPlot* plot) {
    int n = 0;
    for (int i = 0; i < plot->itemCount(); ++i) n += plot->item(i)->objectName() == kMarker;
    return n;
}

}  // namespace fp8scope::views
