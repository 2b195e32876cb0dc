// The main window's layout and command line, without a display: the default dock
// arrangement gives the analysis plots the height and leaves both dock bands room to be
// dragged; the command line is read before any window exists (--help, bad options) and
// takes operand labels as the tables write them.
#include <QDockWidget>
#include <QMainWindow>
#include <QTest>
#include <qcustomplot.h>

#include "command_line.h"
#include "dock_layout.h"
#include "synthetic_trace.h"
#include "widgets/view_set.h"

using namespace fp8scope;
using namespace fp8scope::views;
namespace t = fp8scope::testing;

class LayoutTest : public QObject {
    Q_OBJECT

    static int minHeight(QDockWidget* d) { return d->minimumSizeHint().height(); }

private slots:
    void defaultLayoutGivesThePlotsTheHeight() {
        SeriesStore store;
        StepCursor cursor;
        Selection selection;
        QMainWindow window;
        ViewSet set(&store, &cursor, &selection);
        DockLayout docks(&window, set.views());
        window.resize(1200, 900);
        docks.setEmpty(true);  // as the window starts: nothing open
        window.show();
        QVERIFY(QTest::qWaitForWindowExposed(&window));
        docks.setEmpty(false);  // a trace opened
        QCoreApplication::processEvents();
        // Only the views in front are on screen, so only they redraw on new data (Qt keeps
        // a dock tabbed behind another visible, off the window).
        QStringList shown;
        for (StoreView* v : set.views())
            if (v->onScreen()) shown << v->name();
        QCOMPARE(shown, (QStringList{"loss", "layers"}));
        // A trace arrives: the views in front draw it, the events table behind them does not...
        QVERIFY(store.append(store.reset(t::synthetic_meta({})), t::synthetic_batch({})));
        set.refreshNow();
        StoreView* events = set.view("events");
        QCOMPARE(events->table()->rowCount(), 0);
        QVERIFY(set.view("loss")->table()->rowCount() > 0);
        auto* plots = window.findChild<QDockWidget*>("dock_error");
        auto* tables = window.findChild<QDockWidget*>("dock_layers");
        // ... until it is raised: then it catches up.
        QVERIFY(docks.raise("events"));
        QTRY_VERIFY(events->table()->rowCount() > 0);
        QVERIFY(events->onScreen() && !set.view("layers")->onScreen());
        QVERIFY(docks.raise("layers"));
        QVERIFY(docks.raise("error"));
        QVERIFY(!docks.raise("no_such_view"));
        QCoreApplication::processEvents();
        const int h = plots->height() + tables->height();
        QVERIFY2(tables->height() <= 0.25 * h, qPrintable(QString("tables %1 of %2").arg(tables->height()).arg(h)));
        QVERIFY(plots->height() >= 0.7 * h);
        // Both bands can be dragged either way: the minimum heights of the plots (every
        // tabbed view) and of the tables leave most of the height free.
        int plots_min = 0, tables_min = 0;
        for (QDockWidget* d : window.findChildren<QDockWidget*>())
            (window.dockWidgetArea(d) == Qt::BottomDockWidgetArea ? tables_min : plots_min) =
                std::max(window.dockWidgetArea(d) == Qt::BottomDockWidgetArea ? tables_min : plots_min, minHeight(d));
        QVERIFY2(plots_min + tables_min <= 0.6 * h, qPrintable(QString("minimum %1 + %2 of %3").arg(plots_min).arg(tables_min).arg(h)));
        QVERIFY(tables->height() > tables_min);
        window.resizeDocks({plots, tables}, {h / 2, h / 2}, Qt::Vertical);
        QCoreApplication::processEvents();
        QVERIFY2(tables->height() > 0.4 * h, qPrintable(QString("dragged to %1 of %2").arg(tables->height()).arg(h)));
        // Reset layout brings the default sizes back.
        docks.reset();
        QCoreApplication::processEvents();
        QVERIFY(tables->height() <= 0.25 * h);
    }

    void helpAndBadOptionsNeedNoApplication() {
        const QStringList views = ViewSet::names();
        GuiOptions help = parse_command_line({"fp8scope", "--help"}, views);
        QVERIFY(help.ok && help.help && !help.needsDisplay());
        QVERIFY(help.text.startsWith("Usage: fp8scope [options]"));
        QVERIFY(help.text.contains("--select"));
        GuiOptions bad = parse_command_line({"fp8scope", "--no-such-option"}, views);
        QVERIFY(!bad.ok && !bad.needsDisplay());
        QVERIFY(bad.text.contains("no-such-option"));
        GuiOptions shot = parse_command_line({"fp8scope", "--screenshot", "o.png", "a.h5", "--open", "b.h5",
                                              "--select", "L0 qkv dgrad+wgrad dy", "--raise", "error", "--statistic",
                                              "output SQNR"}, views);
        QVERIFY(shot.ok && !shot.needsDisplay());
        QCOMPARE(shot.traces, (QStringList{"b.h5", "a.h5"}));
        QCOMPARE(shot.select, QString("L0 qkv dgrad+wgrad dy"));
        QCOMPARE(shot.raise, QString("error"));
        QCOMPARE(shot.statistic, QString("output SQNR"));
        QVERIFY(parse_command_line({"fp8scope", "run.h5"}, views).needsDisplay());
        const GuiOptions attach = parse_command_line({"fp8scope", "--attach", "unix:/tmp/e.sock", "--token", "t0"}, views);
        QCOMPARE(attach.attach, QString("unix:/tmp/e.sock"));
        QCOMPARE(attach.token, QString("t0"));
        QCOMPARE(parse_command_line({"fp8scope", "--large-trace-rows", "1000", "a.h5"}, views).large_rows, 1000ull);
        QCOMPARE(parse_command_line({"fp8scope", "a.h5"}, views).large_rows, 0ull);
        for (const char* v : {"0", "-5", "many"}) {
            const GuiOptions large = parse_command_line({"fp8scope", "--large-trace-rows", v}, views);
            QVERIFY(!large.ok);
            QCOMPARE(large.text, QString("--large-trace-rows: '%1' is not a number of step records above 0\n").arg(v));
        }
    }
};

QTEST_MAIN(LayoutTest)
#include "test_layout.moc"
