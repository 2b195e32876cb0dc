// `fp8scope --screenshot` run as a user runs it: it waits for the whole trace, writes a
// PNG that shows it, and on a trace it cannot read writes nothing and exits non-zero with
// the reason (bug 2: it gave up after 120 s, wrote an empty image and exited 0); the
// user's saved dock layout does not change it. Two traces on the command line open as one
// comparison, their runs named by file. What a picture shows is checked where it must be:
// each run's line colour in each plot it belongs in, level lines where the data put them,
// text where the axis labels and tables are.
#include <QDockWidget>
#include <QImage>
#include <QMainWindow>
#include <QProcess>
#include <QSettings>
#include <QTemporaryDir>
#include <QTest>
#include <algorithm>
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
    // The line colours of runs 0, 1, 2 (plot_style.cpp's palette: the baseline's grey, then
    // Tableau blue and red).
    static constexpr QRgb kRunColours[] = {0xff333333, 0xff1f77b4, 0xffd62728};

    // Pixels of `c` in `r`, each channel within `tolerance` (a thin line's antialiased
    // pixels are near its colour, few are exactly it).
    static int count(const QImage& img, const QRect& r, QRgb c, int tolerance = 0) {
        int n = 0;
        for (int y = std::max(r.top(), 0); y <= std::min(r.bottom(), img.height() - 1); ++y)
            for (int x = std::max(r.left(), 0); x <= std::min(r.right(), img.width() - 1); ++x) {
                const QRgb p = img.pixel(x, y);
                n += std::abs(qRed(p) - qRed(c)) <= tolerance && std::abs(qGreen(p) - qGreen(c)) <= tolerance &&
                     std::abs(qBlue(p) - qBlue(c)) <= tolerance;
            }
        return n;
    }
    // Near-black pixels in `r`: text.
    static int count_dark(const QImage& img, const QRect& r) {
        int n = 0;
        for (int y = std::max(r.top(), 0); y <= std::min(r.bottom(), img.height() - 1); ++y)
            for (int x = std::max(r.left(), 0); x <= std::min(r.right(), img.width() - 1); ++x) {
                const QColor p(img.pixel(x, y));
                n += p.red() < 80 && p.green() < 80 && p.blue() < 80;
            }
        return n;
    }
    // The row of [0, right) with most pixels of `c`, if it has at least 300 of them (a level
    // line across a plot); -1 otherwise.
    static int longest_row(const QImage& img, int right, QRgb c) {
        int best = -1, most = 299;
        for (int y = 0; y < img.height(); ++y)
            if (const int n = count(img, QRect(0, y, right, 1), c); n > most) best = y, most = n;
        return best;
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
        // Every run's line colour in the Loss dock, text in the Layers table under it.
        const int half = img.height() / 2;
        for (int run = 0; run < 3; ++run) {
            const int n = count(img, QRect(0, 0, img.width(), half), kRunColours[run]);
            QVERIFY2(n >= 200, qPrintable(QString("run %1: %2 pixels of its colour").arg(run).arg(n)));
        }
        const int text = count_dark(img, QRect(0, half, img.width(), img.height() - half));
        QVERIFY2(text >= 2000, qPrintable(QString("%1 text pixels in the lower half").arg(text)));
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

    // `--statistic`: the error view's box item of that name; a name it does not have is a
    // bad name (exit 2, no image).
    void errorViewStatistic() {
        const QString out = dir_.filePath("error.png");
        const Run r = shoot({"--screenshot", out, "--view", "error", "--statistic", "output SQNR", dir_.filePath("a.h5")});
        QVERIFY2(r.exit_code == 0, qPrintable(r.err));
        QVERIFY(!QImage(out).isNull());
        const Run bad = shoot({"--screenshot", dir_.filePath("none.png"), "--view", "error", "--statistic", "output snr",
                               dir_.filePath("a.h5")});
        QCOMPARE(bad.exit_code, 2);
        QVERIFY2(bad.err.contains("output snr"), qPrintable(bad.err));
        QVERIFY(!QFile::exists(dir_.filePath("none.png")));
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

    // `--view loss`: each plot shows every run that belongs in it, at the right place, with
    // its axis labels; the summary table beside the plots is filled in.
    void theLossViewDrawsEveryRunInEveryPlot() {
        const QString out = dir_.filePath("loss_a.png");
        const Run r = shoot({"--screenshot", out, "--view", "loss", dir_.filePath("a.h5")});
        QVERIFY2(r.exit_code == 0, qPrintable(r.err));
        const QImage img(out);
        QCOMPARE(img.size(), QSize(1200, 760));
        // The plots take the left part of the view, the table the right.
        const int plots_right = img.width() * 7 / 12;
        // The difference plot: delayed's loss is the baseline's + 0.05, blockwise's + 0.1,
        // so their EMAs are level lines across the plot, blockwise's above delayed's; the
        // baseline has none.
        const int delayed_row = longest_row(img, plots_right, kRunColours[1]);
        const int blockwise_row = longest_row(img, plots_right, kRunColours[2]);
        QVERIFY2(delayed_row >= 0 && blockwise_row >= 0 && blockwise_row < delayed_row,
                 qPrintable(QString("level lines at rows %1 (delayed), %2 (blockwise)")
                                .arg(delayed_row)
                                .arg(blockwise_row)));
        QCOMPARE(longest_row(img, plots_right, kRunColours[0]), -1);
        // Above those lines the loss plot, below them the time plot: every run in both.
        const int label_left = 75;  // the tick labels left of the plots (with units: "100 ms")
        const QRect loss_plot(label_left + 10, 0, plots_right - label_left - 10, blockwise_row - 40);
        const QRect time_plot(label_left + 10, delayed_row + 40, plots_right - label_left - 10,
                              img.height() - delayed_row - 80);
        // (The loss plot's legend holds a short line of each colour too: well under 300. The
        // time plot is the shortest, under a legend of two lines, and its solid lines lie
        // on one another: each run's dashed tokens/s line is most of its colour there.)
        for (int run = 0; run < 3; ++run)
            for (const auto& [plot, least] : {std::pair(loss_plot, 300), std::pair(time_plot, 60)}) {
                const int n = count(img, plot, kRunColours[run], 24);
                QVERIFY2(n >= least, qPrintable(QString("run %1: %2 pixels of its colour in (%3, %4) - (%5, %6)")
                                                  .arg(run).arg(n).arg(plot.left()).arg(plot.top())
                                                  .arg(plot.right()).arg(plot.bottom())));
            }
        // Tick labels left of each plot and under the last one; the table's text.
        for (const QRect& labels : {QRect(0, 0, label_left, blockwise_row - 40),
                                    QRect(0, blockwise_row - 40, label_left, 80),
                                    QRect(0, delayed_row + 40, label_left, img.height() - delayed_row - 80),
                                    QRect(label_left, img.height() - 40, plots_right - label_left, 40),
                                    QRect(plots_right, 0, img.width() - plots_right, 150)}) {
            const int n = count_dark(img, labels);
            QVERIFY2(n >= 30, qPrintable(QString("%1 text pixels in (%2, %3) - (%4, %5)").arg(n).arg(labels.left())
                                             .arg(labels.top()).arg(labels.right()).arg(labels.bottom())));
        }
    }
};

QTEST_MAIN(ScreenshotTest)
#include "test_screenshot.moc"
