// The Findings view on a real trace: a tiny lock-step run with a 1000x outlier injected
// into one linear's input under delayed scaling. The view diagnoses the file off the GUI
// thread; its first finding names the injection, and activating it picks the run, the
// operand and the step and asks for the error view. A clean finding list's targets:
// operands without a GEMM go to the first GEMM that reads them.
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>

#include "real_run.h"
#include "widgets/findings_view.h"

using namespace fp8scope;
using namespace fp8scope::views;

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
        SeriesStore store;
        StepCursor cursor;
        Selection selection;
        FindingsView view({&store, &cursor, &selection});
        view.setTracePath(path_);
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

    void aDamagedPathSaysSoInsteadOfFindings() {
        SeriesStore store;
        StepCursor cursor;
        Selection selection;
        FindingsView view({&store, &cursor, &selection});
        view.setTracePath(dir_.filePath("missing.h5"));
        QVERIFY(view.waitForFindings(60000));
        QCOMPARE(view.model().rowCount(), 0);
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
    }
};

QTEST_MAIN(FindingsTest)
#include "test_findings.moc"
