// Axis ticks, time units and what the plots show at the edges of the data, without a
// display: log ticks spread over every decade of a range, durations in the unit that fits
// them, event labels that read away from the nearer edge, colour maps of one column or
// row, and the kurtosis axis turning log when values span decades.
#include <QTest>
#include <qcustomplot.h>

#include "show_view.h"
#include "synthetic_trace.h"
#include "widgets/event_markers.h"
#include "widgets/loss_view.h"
#include "widgets/outliers_view.h"
#include "widgets/plot_style.h"

using namespace fp8scope;
using namespace fp8scope::views;
namespace t = fp8scope::testing;

class AxesTest : public QObject {
    Q_OBJECT

    static QVector<double> near(QVector<double> v) {
        for (double& x : v) x = std::round(x * 1e6) / 1e6;
        return v;
    }

private slots:
    void logTicksCoverEveryDecade() {
        // Step times of 2.5 ms steady with 240 ms spikes: 1-2-5 fits six ticks.
        QCOMPARE(near(log_ticks(2.5, 240, 6)), (QVector<double>{5, 10, 20, 50, 100, 200}));
        QCOMPARE(near(log_ticks(2, 240, 4)), (QVector<double>{3, 10, 30, 100}));
        // Five decades in four ticks: every second decade.
        QCOMPARE(near(log_ticks(1, 1e5, 4)), (QVector<double>{1, 100, 1e4}));
        // Within a decade: round linear steps.
        QCOMPARE(near(log_ticks(3.1, 3.9, 5)), (QVector<double>{3.2, 3.4, 3.6, 3.8}));
        QVERIFY(log_ticks(0, 10, 5).isEmpty());
        QCOMPARE(round_down_log(3.7), 2.0);
        QCOMPARE(round_down_log(0.06), 0.05);
        QCOMPARE(round_down_log(100), 100.0);
        QVERIFY(spans_decades({3, 3.5, 7e4}));
        QVERIFY(!spans_decades({3, 4, 11}));
        QVERIFY(!spans_decades({0, -1, 50}));
    }

    void durationsInTheUnitThatFits() {
        QCOMPARE(format_duration(1e6), QString("1 s"));
        QCOMPARE(format_duration(1.5e6), QString("1.5 s"));
        QCOMPARE(format_duration(2000), QString("2 ms"));
        QCOMPARE(format_duration(250), QString("250 us"));
        QCOMPARE(format_duration(0.5), QString("500 ns"));
        // A 150 ms timeline: every tick in ms, also the first.
        QCOMPARE(time_tick_label(0, 150000), QString("0 ms"));
        QCOMPARE(time_tick_label(20000, 150000), QString("20 ms"));
        QCOMPARE(time_tick_label(1e6, 1.5e6), QString("1 s"));
        QCOMPARE(time_tick_label(300, 800), QString("300 us"));
        // A QCustomPlot axis of milliseconds on log ticks: labels with units.
        QCustomPlot plot;
        plot.resize(400, 300);
        set_log_ticks(plot.yAxis, 4, 1000.0);
        plot.yAxis->setRange(2, 240);
        plot.replot();
        QCOMPARE(plot.yAxis->tickVectorLabels(), (QVector<QString>{"3 ms", "10 ms", "30 ms", "100 ms"}));
        set_time_ticks(plot.xAxis, 1.0);
        plot.xAxis->setRange(0, 1.5e5);
        plot.replot();
        for (const QString& l : plot.xAxis->tickVectorLabels()) QVERIFY2(l.endsWith(" ms") && !l.contains('e'), qPrintable(l));
    }

    void eventLabelsReadAwayFromTheNearerEdge() {
        QCOMPARE(event_label_side(10, 0, 80), Qt::Alignment(Qt::AlignLeft));
        QCOMPARE(event_label_side(80, 1, 80), Qt::Alignment(Qt::AlignRight));
        QCOMPARE(event_label_side(0, 1, 80), Qt::Alignment());  // off the axis: no label
    }

    void oneColumnMapsFill() {
        QCustomPlot plot;
        auto* map = new QCPColorMap(plot.xAxis, plot.yAxis);
        // One capture step (40) and one exponent row: still a cell one step wide.
        fill_grid(map, QCPRange(40, 40), 1, QCPRange(-3, -3), 1, [](int, int) { return 2.0; });
        // QCustomPlot draws half a cell beyond the outer cells' centres.
        const QCPRange keys = map->data()->keyRange();
        const double half = 0.5 * keys.size() / (map->data()->keySize() - 1);
        QCOMPARE(keys.lower - half, 39.5);
        QCOMPARE(keys.upper + half, 40.5);
        QCOMPARE(map->data()->data(40, -3), 2.0);
        // Several columns keep their centres.
        fill_grid(map, QCPRange(10, 30), 3, QCPRange(0, 1), 2, [](int c, int r) { return c + 10.0 * r; });
        QCOMPARE(map->data()->data(20, 1), 11.0);
    }

    void outliersOnOneCaptureAndOneLinear() {
        t::SyntheticSpec spec;
        spec.linears = 1;
        spec.steps = 5;         // captures at 0 only
        spec.capture_every = 10;
        SeriesStore store;
        StepCursor cursor;
        Selection selection;
        QVERIFY(store.append(store.reset(t::synthetic_meta(spec)), t::synthetic_batch(spec)));
        ViewSet set(&store, &cursor, &selection);
        selection.setRun(0);
        selection.setOperand({0, Gemm::Fprop, Operand::X});
        cursor.setStep(4);
        auto* v = t::show_view<OutliersView>(set, "outliers", {1000, 700});
        for (QCustomPlot* p : {v->layersHeatmap(), v->stepsHeatmap()}) {
            auto* map = qobject_cast<QCPColorMap*>(p->plottable(0));
            bool found = false;
            const QCPRange keys = map->getKeyRange(found);
            QVERIFY(found);
            QVERIFY2(keys.size() > 0, qPrintable(plot_title(p)));
            const QCPRange values = map->getValueRange(found);
            QVERIFY2(values.size() > 0, qPrintable(plot_title(p)));
            QCPRange data;
            QVERIFY(finite_range(map, &data));
        }
        v->hide();
    }

    void kurtosisTurnsLogOverDecades() {
        t::SyntheticSpec spec;  // kurtosis 3 + slot: under two decades
        SeriesStore store;
        StepCursor cursor;
        Selection selection;
        QVERIFY(store.append(store.reset(t::synthetic_meta(spec)), t::synthetic_batch(spec)));
        ViewSet set(&store, &cursor, &selection);
        selection.setOperand({0, Gemm::Fprop, Operand::X});
        cursor.setStep(30);
        auto* v = t::show_view<OutliersView>(set, "outliers", {1000, 700});
        QCOMPARE(v->kurtosisPlot()->yAxis->scaleType(), QCPAxis::stLinear);
        v->hide();
        // One heavy-tailed tensor, kurtosis 7e4: log axis, every bar's top inside it.
        views::TraceBatch batch = t::synthetic_batch(spec);
        for (auto& o : batch.operands)
            if (o.key.linear == 1 && o.key.gemm == Gemm::Fprop && o.key.operand == Operand::X) o.stats.outliers.kurtosis = 7e4;
        SeriesStore heavy;
        QVERIFY(heavy.append(heavy.reset(t::synthetic_meta(spec)), std::move(batch)));
        ViewSet set2(&heavy, &cursor, &selection);
        auto* w = t::show_view<OutliersView>(set2, "outliers", {1000, 700});
        QCPAxis* y = w->kurtosisPlot()->yAxis;
        QCOMPARE(y->scaleType(), QCPAxis::stLogarithmic);
        QVERIFY(y->range().lower > 1 && y->range().lower <= 3 && y->range().upper >= 7e4 && y->range().upper < 1.6e5);
        QVERIFY(y->tickVector().size() >= 3);  // labelled from the Gaussian's 3 up to 7e4
        w->hide();
    }
};

QTEST_MAIN(AxesTest)
#include "test_axes.moc"
