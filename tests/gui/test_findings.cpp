// The Findings view on a real trace: a tiny lock-step run with a 1000x outlier injected
// into one linear's input under delayed scaling. The view diagnoses the file off the GUI
// thread; its first finding names the injection, and activating it picks the run, the
// operand and the step and asks for the error view. A clean finding list's targets:
// operands without a GEMM go to the first GEMM that reads them.
#include <QSignalSpy>
#include <QFile>
#include <QTemporaryDir>
#include <qcustomplot.h>

#include "attribution_table.h"
#include <QTest>

#include "real_run.h"
#include "widgets/findings_view.h"

using namespace fp8scope;
using namespace fp8scope::views;

// A Findings view over its own store, cursor and selection, diagnosing `path`.
struct Viewed {
    SeriesStore store;
    StepCursor cursor;
    Selection selection;
    FindingsView view{{&store, &cursor, &selection}};
    explicit Viewed(const QString& path) { view.setTracePath(path); }
};

class FindingsTest : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;
    QString path_;

private slots:
    void initTestCase() {
        TrainConfig c = testing::tiny_compare_config(24);
        c.compare = {"baseline", "delayed"};
        c.capture_every = 2;
        Injection inj;
        inj.step = 12;
        inj.layer = 0;
        inj.linear = "mlp.fc2";
        inj.operand = Operand::X;
        inj.indices = {3};
        inj.scale = 1000.0f;
        c.inject = {inj};
        path_ = dir_.filePath("inject.h5");
        testing::train_and_record(path_.toStdString(), c, 0);
    }

    void leadingFindingIsTheInjectionAndLinksToItsOperand() {
        Viewed v(path_);
        FindingsView& view = v.view;
        StepCursor& cursor = v.cursor;
        const Selection& selection = v.selection;
        QVERIFY(view.waitForFindings(60000));
        const FindingsModel& m = view.model();
        QVERIFY(m.rowCount() > 0);
        const diagnose::Finding& f = m.finding(0);
        QCOMPARE(QString::fromStdString(f.kind), QString("injection"));
        QCOMPARE(f.run, 1);                                   // delayed: the run the outlier harms
        QVERIFY(f.step >= 12 && f.step <= 14);                // within one capture interval of its start
        QVERIFY(f.operand && *f.operand == Operand::X);
        QVERIFY(m.data(m.index(0, FindingsModel::Where), Qt::DisplayRole).toString().contains("blocks.0.mlp.fc2"));
        QVERIFY(m.details(0).contains("fix:"));
        QVERIFY(m.headline().contains("critical"));

        cursor.setRange(1, 24);  // as the view set sets it from the loaded trace
        QSignalSpy shown(&view, &FindingsView::showView);
        view.jumpTo(0);
        QCOMPARE(shown.count(), 1);
        QCOMPARE(shown.at(0).at(0).toString(), QString("error"));
        QCOMPARE(selection.run(), 1);
        QCOMPARE(selection.operand().linear, f.linear);
        QVERIFY(selection.operand().operand == Operand::X);
        QCOMPARE(cursor.step(), f.step);
    }

    // An attribute trace: its groups as a finding (the chosen set as the fix) and a plot.
    void attributionIsAFindingAndAPlot() {
        const QString copy = dir_.filePath("attributed.h5");
        QVERIFY(QFile::copy(path_, copy));
        trace::write_attribution_table(copy.toStdString(), {{"blocks.0.mlp.fc2", "linear", 2.5, 0.8, 1, 1},
                                                            {"blocks.1.mlp.fc1", "linear", 2.7, 0.1, 3, 0},
                                                            {"blocks.0.attn.qkv", "linear", 2.6, 0.3, 2, 0}});
        Viewed v(copy);
        FindingsView& view = v.view;
        QVERIFY(view.waitForFindings(60000));
        const FindingsModel& m = view.model();
        QCOMPARE(int(m.attribution().size()), 3);
        QCOMPARE(QString::fromStdString(m.attribution()[1].group), QString("blocks.0.attn.qkv"));  // by rank
        int at = -1;
        for (int r = 0; r < m.rowCount(); ++r)
            if (m.finding(r).kind == "attribution") at = r;
        QVERIFY(at >= 0);
        const diagnose::Finding& f = m.finding(at);
        QVERIFY(f.fix && f.fix->override == "blocks.0.mlp.fc2");
        QVERIFY(QString::fromStdString(f.summary).contains("blocks.0.mlp.fc2 (80%)"));
        QCustomPlot* plot = view.attributionPlot();
        QVERIFY(!plot->isHidden());
        QCOMPARE(plot->plottableCount(), 2);  // chosen and the rest
        auto* chosen = qobject_cast<QCPBars*>(plot->plottable(0));
        auto* others = qobject_cast<QCPBars*>(plot->plottable(1));
        QCOMPARE(chosen->data()->size(), 1);
        QCOMPARE(others->data()->size(), 2);
        QCOMPARE(chosen->data()->at(0)->value, 80.0);
        QCOMPARE(chosen->data()->at(0)->key, 3.0);  // rank 1 on top
    }

    void aDamagedPathSaysSoInsteadOfFindings() {
        Viewed v(dir_.filePath("missing.h5"));
        QVERIFY(v.view.waitForFindings(60000));
        QCOMPARE(v.view.model().rowCount(), 0);
    }

    void targetsOfFindingsWithoutAGemm() {
        diagnose::Finding dy;
        dy.kind = "overflow_burst";
        dy.run = 2;
        dy.step = 40;
        dy.linear = 5;
        dy.operand = Operand::DY;
        const FindingTarget t = finding_target(dy);
        QCOMPARE(t.view, QString("error"));
        QVERIFY(t.operand && t.operand->gemm == Gemm::Dgrad && t.operand->linear == 5);
        diagnose::Finding gap;
        gap.kind = "loss_gap";
        gap.run = 1;
        QCOMPARE(finding_target(gap).view, QString("loss"));
        QVERIFY(!finding_target(gap).operand);
        diagnose::Finding rewind;
        rewind.kind = "rewind";
        QCOMPARE(finding_target(rewind).view, QString("events"));
        diagnose::Finding headroom;
        headroom.kind = "headroom";
        QCOMPARE(finding_target(headroom).view, QString("amax"));
        diagnose::Finding alignment;
        alignment.kind = "gate_up_alignment";
        alignment.linear = 2;  // fc1: the layer, no operand
        QCOMPARE(finding_target(alignment).view, QString("outliers"));
        QVERIFY(!finding_target(alignment).operand);
    }
};

QTEST_MAIN(FindingsTest)
#include "test_findings.moc"
