// Shared step-plot interaction. The crosshair lives on the cursor layer, so hovering
// repaints that layer alone, never the series.
#include "widgets/plot_interaction.h"

#include <QMenu>
#include <QMouseEvent>
#include <QRegularExpression>
#include <QToolTip>
#include <cmath>
#include <qcustomplot.h>

#include "models/model_roles.h"
#include "models/step_cursor.h"
#include "widgets/plot_style.h"

namespace fp8scope::views {

namespace {
constexpr char kProperty[] = "fp8scope_interaction";
constexpr int kClickSlopPx = 4;  // a press and release closer than this is a click, not a drag
constexpr double kMarkerSnapPx = 6;

// QCustomPlot names a graph "Graph N" until it is named: a series the view keeps to
// itself (a legend key, a helper).
bool is_unnamed(const QCPGraph* g) {
    static const QRegularExpression kDefault(QStringLiteral("^Graph \\d+$"));
    return g->name().isEmpty() || kDefault.match(g->name()).hasMatch();
}

// The value of `p` nearest to `key`, or NaN when it has none there.
double value_near(QCPAbstractPlottable* p, double key, double value, QString* name) {
    *name = p->name();
    if (auto* g = qobject_cast<QCPGraph*>(p)) {
        if (g->data()->isEmpty() || is_unnamed(g)) return NAN;
        auto it = g->data()->findBegin(key, false);  // the first point at or after key
        if (it == g->data()->constEnd() || (it != g->data()->constBegin() && key - (it - 1)->key < it->key - key)) --it;
        // Markers without a line (overflow steps, eval points) count only under the mouse.
        const double px = std::abs(g->keyAxis()->coordToPixel(it->key) - g->keyAxis()->coordToPixel(key));
        return g->lineStyle() == QCPGraph::lsNone && px > kMarkerSnapPx ? NAN : it->value;
    }
    if (auto* m = qobject_cast<QCPColorMap*>(p)) {
        int c = 0, r = 0;
        m->data()->coordToCell(key, value, &c, &r);
        if (c < 0 || r < 0 || c >= m->data()->keySize() || r >= m->data()->valueSize()) return NAN;
        if (name->isEmpty() && m->colorScale()) *name = m->colorScale()->axis()->label();
        return m->data()->cell(c, r);
    }
    return NAN;
}
}  // namespace

PlotInteraction* PlotInteraction::attach(QCustomPlot* plot, StepCursor* cursor) {
    if (PlotInteraction* p = of(plot)) return p;
    return new PlotInteraction(plot, cursor);
}

PlotInteraction* PlotInteraction::of(const QCustomPlot* plot) {
    return plot ? plot->property(kProperty).value<PlotInteraction*>() : nullptr;
}

PlotInteraction::PlotInteraction(QCustomPlot* plot, StepCursor* cursor) : QObject(plot), plot_(plot), cursor_(cursor) {
    plot->setProperty(kProperty, QVariant::fromValue(this));
    plot->setMouseTracking(true);
    plot->setContextMenuPolicy(Qt::CustomContextMenu);
    const QPen pen(QColor(120, 120, 120), 1, Qt::DotLine);
    for (QCPItemStraightLine** l : {&vline_, &hline_}) {
        *l = new QCPItemStraightLine(plot);
        (*l)->setLayer(cursor_layer(plot));
        (*l)->setPen(pen);
        (*l)->setVisible(false);
        (*l)->setSelectable(false);
    }
    connect(plot, &QCustomPlot::mousePress, this, &PlotInteraction::onPress);
    connect(plot, &QCustomPlot::mouseRelease, this, &PlotInteraction::onRelease);
    connect(plot, &QCustomPlot::mouseMove, this, &PlotInteraction::onMove);
    connect(plot, &QCustomPlot::mouseDoubleClick, this, [this] { resetZoom(); });
    connect(plot, &QWidget::customContextMenuRequested, this, &PlotInteraction::showMenu);
}

QCPAxisRect* PlotInteraction::rectAt(const QPoint& pos) const {
    for (QCPAxisRect* r : plot_->axisRects())
        if (r->rect().contains(pos)) return r;
    return nullptr;
}

void PlotInteraction::onPress(QMouseEvent* e) { press_ = e->pos(); }

void PlotInteraction::onRelease(QMouseEvent* e) {
    if (!cursor_ || e->button() != Qt::LeftButton || (e->pos() - press_).manhattanLength() > kClickSlopPx) return;
    if (QCPAxisRect* r = rectAt(e->pos()))
        cursor_->setStep(std::llround(r->axis(QCPAxis::atBottom)->pixelToCoord(e->pos().x())));
}

QString PlotInteraction::hoverText(const QPoint& pos) const {
    QCPAxisRect* r = rectAt(pos);
    if (!r) return {};
    const double key = r->axis(QCPAxis::atBottom)->pixelToCoord(pos.x());
    if (describe_) return describe_(r, key, r->axis(QCPAxis::atLeft)->pixelToCoord(pos.y()));
    QStringList lines{tr("step %1").arg(std::llround(key))};
    for (QCPAbstractPlottable* p : r->plottables()) {
        if (!p->visible()) continue;
        QString name;
        const double v = value_near(p, key, p->valueAxis()->pixelToCoord(pos.y()), &name);
        if (std::isfinite(v)) lines << QStringLiteral("%1: %2").arg(name, format_figure(v));
    }
    return lines.join('\n');
}

void PlotInteraction::onMove(QMouseEvent* e) {
    QCPAxisRect* r = rectAt(e->pos());
    vline_->setVisible(r != nullptr);
    hline_->setVisible(r != nullptr);
    if (r) {
        QCPAxis *x = r->axis(QCPAxis::atBottom), *y = r->axis(QCPAxis::atLeft);
        const double key = x->pixelToCoord(e->pos().x()), value = y->pixelToCoord(e->pos().y());
        for (QCPItemStraightLine* l : {vline_, hline_}) {
            l->setClipAxisRect(r);
            for (auto* p : {l->point1, l->point2}) p->setAxes(x, y);
        }
        vline_->point1->setCoords(key, value);
        vline_->point2->setCoords(key, value + 1);
        hline_->point1->setCoords(key, value);
        hline_->point2->setCoords(key + 1, value);
        QToolTip::showText(e->globalPosition().toPoint(), hoverText(e->pos()), plot_);
    } else {
        QToolTip::hideText();
    }
    replot_cursor_layer(plot_);
}

void PlotInteraction::resetZoom() {
    fit_axes(plot_);
    plot_->replot();
}

bool PlotInteraction::logY(QCPAxisRect* rect) const {
    rect = rect ? rect : plot_->axisRect();
    return rect && rect->axis(QCPAxis::atLeft)->scaleType() == QCPAxis::stLogarithmic;
}

void PlotInteraction::setLogY(bool on, QCPAxisRect* rect) {
    for (QCPAxisRect* r : rect ? QList<QCPAxisRect*>{rect} : plot_->axisRects()) {
        QCPAxis* y = r->axis(QCPAxis::atLeft);
        if (on == logY(r)) continue;
        if (on) {
            set_log_axis(y);
        } else {
            y->setScaleType(QCPAxis::stLinear);
            y->setTicker(QSharedPointer<QCPAxisTicker>(new QCPAxisTicker));
            y->setNumberFormat("gb");
            y->setNumberPrecision(6);
        }
        emit logYChanged(on, r);
    }
    resetZoom();
}

void PlotInteraction::showMenu(const QPoint& pos) {
    QMenu menu(plot_);
    QCPAxisRect* rect = rectAt(pos);
    QAction* log = menu.addAction(tr("Log y axis"));
    log->setCheckable(true);
    log->setEnabled(rect != nullptr);
    log->setChecked(rect && logY(rect));
    connect(log, &QAction::toggled, this, [this, rect](bool on) { setLogY(on, rect); });
    menu.addAction(tr("Reset zoom (double-click)"), this, &PlotInteraction::resetZoom);
    menu.exec(plot_->mapToGlobal(pos));
}

}  // namespace fp8scope::views
