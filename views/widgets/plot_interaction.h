// What users of plotting tools expect on every step plot, in one place: a click sets the
// step cursor, hovering shows a crosshair and the values under it (graphs: the nearest
// point of each named graph; colour maps: the cell), a double-click resets the zoom, and
// the context menu toggles a log y axis. Views attach it once per plot.
#pragma once

#include <QObject>
#include <QPoint>
#include <functional>

class QCustomPlot;
class QCPAxisRect;
class QCPItemStraightLine;
class QMouseEvent;

namespace fp8scope::views {

class StepCursor;

class PlotInteraction : public QObject {
    Q_OBJECT
public:
    // Owned by `plot`. `cursor` may be null (hover and zoom only).
    static PlotInteraction* attach(QCustomPlot* plot, StepCursor* cursor);
    // The helper attached to `plot`, or null.
    static PlotInteraction* of(const QCustomPlot* plot);

    // The y axis of `rect` (default: the plot's first) logarithmic or linear; setLogY
    // without a rect sets every axis rect's. The context menu sets the one under the mouse.
    bool logY(QCPAxisRect* rect = nullptr) const;
    void setLogY(bool on, QCPAxisRect* rect = nullptr);
    // Resets the zoom to the data (what a double-click does).
    void resetZoom();
    // What the tooltip says at `pos` (widget pixels); empty outside any axis rect. For tests.
    QString hoverText(const QPoint& pos) const;
    // Replaces the tooltip's text (for plots whose x axis is not steps, e.g. a heatmap of
    // layers x quantizers): gets the axis rect and the coordinates under the mouse.
    using Describer = std::function<QString(QCPAxisRect*, double key, double value)>;
    void setDescriber(Describer d) { describe_ = std::move(d); }
    // The crosshair's vertical line (for tests: its position after a hover).
    QCPItemStraightLine* crosshair() const { return vline_; }

signals:
    void logYChanged(bool on, QCPAxisRect* rect);

private:
    PlotInteraction(QCustomPlot* plot, StepCursor* cursor);
    void onPress(QMouseEvent* e);
    void onRelease(QMouseEvent* e);
    void onMove(QMouseEvent* e);
    void showMenu(const QPoint& pos);
    QCPAxisRect* rectAt(const QPoint& pos) const;

    QCustomPlot* plot_;
    StepCursor* cursor_;
    QCPItemStraightLine *vline_, *hline_;
    QPoint press_;
    Describer describe_;
};

}  // namespace fp8scope::views
