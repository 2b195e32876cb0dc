// Finding one's way in a trace without the mouse, and what the app remembers: keyboard
// stepping over capture steps, the operand search, the cursor on a new trace, recent files.
#include <QDir>
#include <QSettings>
#include <QLineEdit>
#include <QTemporaryDir>
#include <QTest>
#include <QWidget>

#include "models/operand_search.h"
#include "models/recent_files.h"
#include "models/step_keys.h"
#include "synthetic_trace.h"

using namespace fp8scope;
using namespace fp8scope::views;
using fp8scope::testing::SyntheticSpec;

class NavigationTest : public QObject {
    Q_OBJECT
    SeriesStore store_;
    StepCursor cursor_;
    Selection selection_;
    SyntheticSpec spec_;  // steps 0..49, capture steps 0, 10, 20, 30, 40

    void load() {
        const auto gen = store_.reset(testing::synthetic_meta(spec_));
        QVERIFY(store_.append(gen, testing::synthetic_batch(spec_)));
        cursor_.setRange(0, spec_.steps - 1);
    }

private slots:
    void init() {
        QCoreApplication::setOrganizationName("fp8scope-test-navigation");
        load();
    }

    void stepAfterWalksSortedSteps() {
        const std::vector<std::int64_t> s{0, 10, 20, 30, 40};
        QCOMPARE(step_after(s, 10, 1), 20);
        QCOMPARE(step_after(s, 13, 1), 20);   // between two: the next one
        QCOMPARE(step_after(s, 13, -1), 10);  // ... and the previous one
        QCOMPARE(step_after(s, 10, -1), 0);
        QCOMPARE(step_after(s, 0, -1), 0);    // stops at the ends
        QCOMPARE(step_after(s, 40, 1), 40);
        QCOMPARE(step_after(s, 49, 1), 40);
        QCOMPARE(step_after(s, 0, 10), 40);
        QCOMPARE(step_after(s, 45, -2), 30);
        QCOMPARE(step_after({}, 7, 1), 7);
    }

    void keysMoveTheCursorOverCaptureSteps() {
        StepKeys keys(&store_, &cursor_, &selection_);
        QCOMPARE(cursor_.step(), 49);  // following the newest step
        keys.by(-1);
        QCOMPARE(cursor_.step(), 40);
        QCOMPARE(cursor_.mode(), StepCursor::Mode::Paused);
        keys.by(-1);
        QCOMPARE(cursor_.step(), 30);
        keys.by(1);
        QCOMPARE(cursor_.step(), 40);
        keys.by(-StepKeys::kPage);
        QCOMPARE(cursor_.step(), 0);
        keys.toLast();
        QCOMPARE(cursor_.step(), 49);
        keys.toFirst();
        QCOMPARE(cursor_.step(), 0);
        keys.by(StepKeys::kPage);
        QCOMPARE(cursor_.step(), 40);
    }

    // Keys that the focused widget does not take reach the window; a text box keeps its own.
    void keyPressesMoveTheCursorUnlessAWidgetTakesThem() {
        StepKeys keys(&store_, &cursor_, &selection_);
        QWidget window;
        auto* plot = new QWidget(&window);  // like a plot: no key handling of its own
        auto* box = new QLineEdit("text", &window);
        keys.bind(&window);
        window.show();
        QVERIFY(QTest::qWaitForWindowExposed(&window));
        cursor_.setStep(20);
        QTest::keyClick(plot, Qt::Key_Right);
        QCOMPARE(cursor_.step(), 30);
        QTest::keyClick(plot, Qt::Key_Left);
        QTest::keyClick(plot, Qt::Key_Left);
        QCOMPARE(cursor_.step(), 10);
        QTest::keyClick(plot, Qt::Key_End);
        QCOMPARE(cursor_.step(), 49);
        QTest::keyClick(plot, Qt::Key_PageUp);
        QCOMPARE(cursor_.step(), 0);
        QTest::keyClick(plot, Qt::Key_PageDown);
        QCOMPARE(cursor_.step(), 40);
        QTest::keyClick(&window, Qt::Key_Home);
        QCOMPARE(cursor_.step(), 0);
        QTest::keyClick(plot, Qt::Key_Right, Qt::ControlModifier);  // not ours
        QCOMPARE(cursor_.step(), 0);
        QTest::keyClick(box, Qt::Key_End);  // the text box moves its caret instead
        QCOMPARE(cursor_.step(), 0);
        QCOMPARE(StepKeys::keys().size(), std::size_t(6));
    }

    void aRunWithoutCaptureStepsStepsOneByOne() {
        const auto gen = store_.reset(testing::synthetic_meta(spec_));
        views::TraceBatch b = testing::synthetic_batch(spec_);
        b.operands.clear();  // no capture step: every step is a stop
        QVERIFY(store_.append(gen, std::move(b)));
        StepKeys keys(&store_, &cursor_, &selection_);
        cursor_.setStep(20);
        keys.by(1);
        QCOMPARE(cursor_.step(), 21);
        keys.by(-3);
        QCOMPARE(cursor_.step(), 18);
    }

    // Bug 5: a paused cursor followed the new run only after the user pressed Follow.
    void followingResumesOnANewTrace() {
        cursor_.setStep(3);
        QCOMPARE(cursor_.mode(), StepCursor::Mode::Paused);
        cursor_.follow();  // what the window does when any source opens a trace
        cursor_.setRange(0, 1);
        QCOMPARE(cursor_.step(), 1);
        cursor_.setRange(0, 7);
        QCOMPARE(cursor_.step(), 7);
        QCOMPARE(cursor_.mode(), StepCursor::Mode::Follow);
    }

    void operandSearchFindsByLabelOrUniquePart() {
        OperandSearch search;
        store_.read([&](const TraceData& d) { search.setMeta(d.meta); });
        // 4 linears x 6 operands, long labels in slot order.
        QCOMPARE(search.labels().size(), 24);
        QCOMPARE(search.labels().front(), QString("blocks.0.attn.qkv fprop x"));
        auto hit = search.find("blocks.1.mlp.fc1 wgrad dy");
        QVERIFY(hit);
        QCOMPARE(hit->linear, 3);
        QCOMPARE(hit->gemm, Gemm::Wgrad);
        QCOMPARE(hit->operand, Operand::DY);
        hit = search.find("BLOCKS.0.ATTN.QKV DGRAD W");  // any case
        QVERIFY(hit);
        QCOMPARE(hit->slot(), trace::operand_slot(0, Gemm::Dgrad, Operand::W));
        // Several match: Enter takes the first in slot order, as the completer lists them.
        hit = search.find("fprop x");
        QVERIFY(hit);
        QCOMPARE(hit->slot(), trace::operand_slot(0, Gemm::Fprop, Operand::X));
        hit = search.find("fc1 wgrad dy");  // every word, in either label
        QVERIFY(hit);
        QCOMPARE(hit->slot(), trace::operand_slot(1, Gemm::Wgrad, Operand::DY));
        // As the Layers table writes a tensor cast once for two GEMMs.
        hit = search.find("L1 fc1 dgrad+wgrad dy");
        QVERIFY(hit);
        QCOMPARE(hit->slot(), trace::operand_slot(3, Gemm::Dgrad, Operand::DY));
        QVERIFY(!search.find("no such layer"));
        QVERIFY(!search.find("  "));
        hit = search.find("1.mlp.fc1 fprop w");  // a unique part
        QVERIFY(hit);
        QCOMPARE(hit->linear, 3);
    }

    // Bug 3: entries were stored as typed, so a relative path opened another file (or
    // none) when the app started elsewhere.
    void recentFilesAreAbsoluteNewestFirst() {
        QSettings().remove("recent");
        QTemporaryDir dir;
        const QString old = QDir::currentPath();
        QDir::setCurrent(dir.path());
        RecentFiles::add("a.h5");
        RecentFiles::add("sub/../b.h5");
        RecentFiles::add(dir.filePath("a.h5"));  // the same file again moves to the front
        QDir::setCurrent(old);
        const QStringList recent = RecentFiles::list();
        QCOMPARE(recent, (QStringList{QDir(dir.path()).absoluteFilePath("a.h5"), QDir(dir.path()).absoluteFilePath("b.h5")}));
        for (int i = 0; i < 2 * RecentFiles::kMax; ++i) RecentFiles::add(QString("/tmp/f%1.h5").arg(i));
        QCOMPARE(RecentFiles::list().size(), RecentFiles::kMax);
        QCOMPARE(RecentFiles::list().front(), QString("/tmp/f%1.h5").arg(2 * RecentFiles::kMax - 1));
        QSettings().remove("recent");
    }
};

QTEST_MAIN(NavigationTest)
#include "test_navigation.moc"
