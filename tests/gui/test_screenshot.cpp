// `fp8scope --screenshot` run as a user runs it: it waits for the whole trace, writes a
// PNG that shows it, and on a trace it cannot read writes nothing and exits non-zero with
// the reason (bug 2: it gave up after 120 s, wrote an empty image and exited 0); the
// user's saved dock layout does not change it. Two traces on the command line open as one
// comparison, their runs named by file.
#include <QDockWidget>
#include <QImage>
#include <QMainWindow>
#include <QProcess>
#include <QSettings>
#include <QTemporaryDir>
#include <QTest>
#include <fstream>

#include "trace_file.h"

namespace t = fp8scope::testing;

class ScreenshotTest : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;

    struct Run {
        int exit_code = -1;
        QString err;
    };
    Run shoot(const QStringList& args) {
        QProcess p;
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        env.insert("QT_QPA_PLATFORM", "offscreen");
        env.insert("XDG_CONFIG_HOME", dir_.filePath("config"));  // not the user's settings
        p.setProcessEnvironment(env);
        p.start(FP8SCOPE_GUI, args);
        if (!p.waitForFinished(90000)) return {};
        return {p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1, QString::fromUtf8(p.readAllStandardError())};
    }
    // Distinct colours in a sample of the image: a blank image has one or two.
    static int colours(const QImage& img) {
        QSet<QRgb> seen;
        for (int y = 0; y < img.height(); y += 7)
            for (int x = 0; x < img.width(); x += 7) seen.insert(img.pixel(x, y));
        return seen.size();
    }

private slots:
    void initTestCase() {
        QVERIFY(dir_.isValid());
        t::SyntheticSpec a;
        t::write_synthetic_trace(dir_.filePath("a.h5"), a);
        t::SyntheticSpec b;
        b.runs = 2;
        b.steps = 30;  // the synthetic events of run 2 come at step 30
        t::write_synthetic_trace(dir_.filePath("b.h5"), b);
        t::SyntheticSpec job;
        job.world_size = 2;  // rank 1 computes 30% longer
        t::write_synthetic_trace(dir_.filePath("job.h5"), job);
        std::ofstream(dir_.filePath("bad.h5").toStdString()) << "not an HDF5 file";
    }

    void aTraceGivesAPngOfIt() {
        const QString out = dir_.filePath("window.png");
        const Run r = shoot({"--screenshot", out, dir_.filePath("a.h5")});
        QVERIFY2(r.exit_code == 0, qPrintable(r.err));
        QImage img(out);
        QVERIFY(!img.isNull());
        QCOMPARE(img.size(), QSize(1200, 760));
        QVERIFY2(colours(img) > 20, qPrintable(QString::number(colours(img))));
    }

    // A saved layout in which the user closed every dock but one: the same image.
    void theSavedLayoutDoesNotMatter() {
        const QString plain = dir_.filePath("plain.png"), saved = dir_.filePath("saved.png");
        QCOMPARE(shoot({"--screenshot", plain, dir_.filePath("a.h5")}).exit_code, 0);
        {
            QMainWindow w;
            for (const char* name : {"loss", "amax", "outliers", "error", "blocks", "kernels", "layers", "events"}) {
                auto* dock = new QDockWidget(name, &w);
                dock->setObjectName(QString("dock_") + name);
                w.addDockWidget(Qt::LeftDockWidgetArea, dock);
                if (QString(name) != "events") dock->hide();
            }
            QSettings settings(dir_.filePath("config/fp8scope/fp8scope.conf"), QSettings::IniFormat);
            settings.setValue("window/state", w.saveState());
            settings.setValue("window/geometry", QByteArray("garbage"));
        }
        QCOMPARE(shoot({"--screenshot", saved, dir_.filePath("a.h5")}).exit_code, 0);
        // The status bar says how long the read took: leave it out.
        const QRect docks(0, 0, 1200, 720);
        QCOMPARE(QImage(saved).copy(docks), QImage(plain).copy(docks));
    }

    void aViewOfAComparisonOfTwoTraces() {
        const QString out = dir_.filePath("loss.png");
        const Run r = shoot({"--screenshot", out, "--view", "loss", "--run", "b.h5: delayed", dir_.filePath("a.h5"),
                             dir_.filePath("b.h5")});
        QVERIFY2(r.exit_code == 0, qPrintable(r.err));
        QVERIFY(!QImage(out).isNull());
        // A run that only a comparison has: the second file was opened too.
        QCOMPARE(shoot({"--screenshot", out, "--run", "b.h5: delayed", dir_.filePath("a.h5")}).exit_code, 2);
    }

    // `--view health` of a two-rank job: the verdict band on top is red (a rank is slow),
    // and the slow rank's thick red lines fill many pixels. FP8SCOPE_SCREENSHOT_DIR keeps a copy.
    void theHealthViewOfATwoRankJob() {
        const QString out = dir_.filePath("health.png");
        const Run r = shoot({"--screenshot", out, "--view", "health", dir_.filePath("job.h5")});
        QVERIFY2(r.exit_code == 0, qPrintable(r.err));
        const QImage img(out);
        QCOMPARE(img.size(), QSize(1200, 760));
        QCOMPARE(QColor(img.pixel(3, 3)), QColor(0xff, 0xd7, 0xd7));
        int slow_line = 0;
        for (int y = 0; y < img.height(); ++y)
            for (int x = 0; x < img.width(); ++x) slow_line += QColor(img.pixel(x, y)) == QColor(0xd62728);
        QVERIFY2(slow_line > 1000, qPrintable(QString::number(slow_line)));
        if (const QByteArray keep = qgetenv("FP8SCOPE_SCREENSHOT_DIR"); !keep.isEmpty())
            QFile::copy(out, QString("%1/screenshot_health.png").arg(QString(keep)));
    }

    void anUnreadableTraceWritesNothingAndFails() {
        for (const QString& trace : {dir_.filePath("bad.h5"), dir_.filePath("missing.h5")}) {
            const QString out = dir_.filePath("never.png");
            const Run r = shoot({"--screenshot", out, trace});
            QCOMPARE(r.exit_code, 1);
            QVERIFY2(r.err.contains(trace) && r.err.contains("no image written"), qPrintable(r.err));
            QVERIFY(!QFile::exists(out));
        }
    }
};

QTEST_MAIN(ScreenshotTest)
#include "test_screenshot.moc"
