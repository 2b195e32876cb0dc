// A step plot's zoom kept across rebuilds and announced (step_zoom.h).
#include "widgets/step_zoom.h"

#include <cmath>
#include <qcustomplot.h>

#include "widgets/plot_style.h"

namespace fp8scope::views {

StepZoom::StepZoom(QCustomPlot* plot, QCPAxis* steps) : QObject(plot), plot_(plot), steps_(steps) {
    connect(steps, qOverload<const QCPRange&>(&QCPAxis::rangeChanged), this,
            [this](const QCPRange& r) { onRangeChanged(r.lower, r.upper); });
    announce_.setSingleShot(true);
    announce_.setInterval(200);
    connect(&announce_, &QTimer::timeout, this, [this] {
        const QCPRange r = steps_->range();
        emit shown(static_cast<qint64>(std::floor(r.lower)), static_cast<qint64>(std::ceil(r.upper)));
    });
}

void StepZoom::onRangeChanged(double lower, double upper) {
    if (fitting_) return;
    // A range over every step is no zoom (a double-click fits the plot to the data).
    if (lower <= data_.first && upper >= data_.second) zoom_.reset();
    else zoom_ = std::pair(lower, upper);
    announce_.start();
}

void StepZoom::fit(double first, double last) {
    fitting_ = true;
    fit_axes(plot_);
    data_ = {first, last};
    if (zoom_)  // the user's zoom stays; the values fit what it shows
        for (QCPAxisRect* rect : plot_->axisRects()) {
            rect->axis(QCPAxis::atBottom)->setRange(zoom_->first, zoom_->second);
            for (QCPAxis* a : rect->axes(QCPAxis::atLeft | QCPAxis::atRight)) {
                bool first_graph = true;
                for (QCPGraph* g : rect->graphs())
                    if (g->valueAxis() == a && !g->data()->isEmpty()) {
                        g->rescaleValueAxis(!first_graph, true);
                        first_graph = false;
                    }
            }
        }
    fitting_ = false;
}

}  // namespace fp8scope::views
