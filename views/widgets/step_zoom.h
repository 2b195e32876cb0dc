// The zoom of a step plot that outlives the plot's rebuilds: a step range the user zooms
// or pans to is kept when new records redraw the plot (a double-click, which fits the plot
// to every step, ends it), with the value axes fitted to what it shows; and once the range
// rests it is announced (shown), so that a large trace's steps there are read at full
// detail (TraceFileLoader::showSteps).
#pragma once

#include <QObject>
#include <QTimer>
#include <optional>
#include <utility>

class QCustomPlot;
class QCPAxis;

namespace fp8scope::views {

class StepZoom : public QObject {
    Q_OBJECT
public:
    // Watches `steps`, the step axis of one of `plot`'s axis rects.
    StepZoom(QCustomPlot* plot, QCPAxis* steps);
    // Fits the plot's axes to its data (fit_axes), then puts the user's zoom back on every
    // axis rect, each value axis fitted to what it shows. `first`, `last`: the steps there are.
    void fit(double first, double last);
    // The user zoomed in (or panned) and has not fitted the plot again.
    bool zoomed() const { return zoom_.has_value(); }

signals:
    void shown(qint64 first, qint64 last);

private:
    void onRangeChanged(double lower, double upper);

    QCustomPlot* plot_;
    QCPAxis* steps_;
    bool fitting_ = false;  // the range changes because the plot is rebuilt, not by the user
    std::optional<std::pair<double, double>> zoom_;  // the user's step range
    std::pair<double, double> data_{0, 0};           // the steps there are
    QTimer announce_;
};

}  // namespace fp8scope::views
