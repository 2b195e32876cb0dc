// Shared plot look.
#include "plot_style.h"

#include <cmath>

namespace fp8scope::views {

QColor series_color(int index) {
    static const QColor palette[] = {QColor(0x33, 0x33, 0x33), QColor(0x1f, 0x77, 0xb4), QColor(0xd6, 0x27, 0x28),
                                     QColor(0x2c, 0xa0, 0x2c), QColor(0xff, 0x7f, 0x0e), QColor(0x94, 0x67, 0xbd),
                                     QColor(0x8c, 0x56, 0x4b), QColor(0xe3, 0x77, 0xc2), QColor(0x17, 0xbe, 0xcf)};
    const int n = static_cast<int>(sizeof(palette) / sizeof(palette[0]));
    return palette[((index % n) + n) % n];
}

QCustomPlot* make_plot(QWidget* parent, const QString& title) {
    auto* plot = new QCustomPlot(parent);
    plot->setInteractions(QCP::iRangeDrag | QCP::iRangeZoom);
    plot->setNoAntialiasingOnDrag(true);
    // Long, noisy series: draw polylines as segments, which Qt strokes far faster.
    plot->setPlottingHint(QCP::phFastPolylines, true);
    plot->setMinimumSize(200, 140);
    QFont f = plot->font();
    f.setPointSize(9);
    for (QCPAxis* a : plot->axisRect()->axes()) {
        a->setTickLabelFont(f);
        a->setLabelFont(f);
    }
    plot->legend->setFont(f);
    plot->legend->setBrush(QColor(255, 255, 255, 210));
    if (!title.isEmpty()) {
        plot->plotLayout()->insertRow(0);
        QFont tf = f;
        tf.setBold(true);
        plot->plotLayout()->addElement(0, 0, new QCPTextElement(plot, title, tf));
    }
    auto* placeholder = new QCPItemText(plot);
    placeholder->setObjectName("placeholder");
    placeholder->position->setType(QCPItemPosition::ptAxisRectRatio);
    placeholder->position->setCoords(0.5, 0.5);
    placeholder->setColor(Qt::gray);
    placeholder->setVisible(false);
    return plot;
}

QCPLayer* cursor_layer(QCustomPlot* plot) {
    if (QCPLayer* l = plot->layer("cursor")) return l;
    plot->addLayer("cursor", plot->layer("main"), QCustomPlot::limAbove);
    QCPLayer* l = plot->layer("cursor");
    l->setMode(QCPLayer::lmBuffered);
    return l;
}

void replot_cursor_layer(QCustomPlot* plot) {
    cursor_layer(plot)->replot();
}

QCPItemStraightLine* add_cursor_line(QCustomPlot* plot, QCPAxisRect* rect) {
    rect = rect ? rect : plot->axisRect();
    auto* line = new QCPItemStraightLine(plot);
    line->setLayer(cursor_layer(plot));
    line->setClipAxisRect(rect);
    for (auto* p : {line->point1, line->point2}) p->setAxes(rect->axis(QCPAxis::atBottom), rect->axis(QCPAxis::atLeft));
    line->setPen(QPen(QColor(0xe0, 0x40, 0x40), 1, Qt::DashLine));
    line->setVisible(false);
    return line;
}

void set_cursor_line(QCPItemStraightLine* line, double step) {
    line->setVisible(step >= 0);
    line->point1->setCoords(step, 0);
    line->point2->setCoords(step, 1);
}

void set_log_axis(QCPAxis* axis) {
    axis->setScaleType(QCPAxis::stLogarithmic);
    axis->setTicker(QSharedPointer<QCPAxisTickerLog>(new QCPAxisTickerLog));
    axis->setNumberFormat("g");
    axis->setNumberPrecision(3);
}

void fit_axes(QCustomPlot* plot) {
    plot->rescaleAxes();
    for (QCPAxis* a : plot->axisRect()->axes(QCPAxis::atLeft | QCPAxis::atRight)) {
        const QCPRange r = a->range();
        if (a->scaleType() == QCPAxis::stLogarithmic) a->setRange(r.lower / 1.1, r.upper * 1.1);
        else if (r.size() > 0) a->setRange(r.lower - 0.05 * r.size(), r.upper + 0.05 * r.size());
        else a->setRange(r.lower - 1, r.upper + 1);
    }
}

void set_label_ticks(QCPAxis* axis, const QStringList& labels) {
    QSharedPointer<QCPAxisTickerText> ticker(new QCPAxisTickerText);
    for (int i = 0; i < labels.size(); ++i) ticker->addTick(i, labels[i]);
    axis->setTicker(ticker);
    axis->setRange(-0.5, labels.size() - 0.5);
}

QVector<double> gaps_for_log(QVector<double> v) {
    for (double& x : v)
        if (!(x > 0) || !std::isfinite(x)) x = qQNaN();
    return v;
}

void set_placeholder(QCustomPlot* plot, const QString& text) {
    for (int i = 0; i < plot->itemCount(); ++i)
        if (auto* t = qobject_cast<QCPItemText*>(plot->item(i)); t && t->objectName() == "placeholder") {
            t->setText(text);
            t->setVisible(!text.isEmpty());
        }
}

}  // namespace fp8scope::views
