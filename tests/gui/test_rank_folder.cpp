// A data-parallel job's folder of rank traces (run.h5, run.rank1.h5), written with the
// TraceWriter as two ranks of a job write them: found in the folder (and what is not one
// job's traces refused with the folder named), opened as one job with every rank's runs,
// the Health view across both ranks, a Kernels lane per rank and stream, and the GUI's
// command line opening the folder.
#include <QDir>
#include <QFile>
#include <QImage>
#include <QProcess>
#include <QTemporaryDir>
#include <QTest>

#include "models/rank_folder.h"
#include "models/rank_health_model.h"
#include "models/trace_file_loader.h"
#include "show_view.h"
#include "trace_writer.h"
#include "widgets/kernel_view.h"
#include "widgets/timeline_widget.h"

using namespace fp8scope;
using namespace fp8scope::views;

namespace {

constexpr int kSteps = 10;

// Rank `rank` of a two-rank job: a host op and the kernel it launched on the rank's GPU,
// every step; rank 0 also keeps every rank's step times.
void write_rank(const QString& path, int rank) {
    trace::TraceMeta m;
    m.tool_version = "test";
    m.runs = {{"baseline", "baseline"}};
    m.training_recipes = {"baseline"};
    m.ops = {"fprop", "gemm_kernel"};
    m.rank = rank;
    m.world_size = 2;
    trace::TraceWriter w(path.toStdString(), m);
    for (std::int64_t step = 1; step <= kSteps; ++step) {
        const std::int64_t t = step * 1'000'000 + rank * 50;
        w.write(trace::OpRecord{0, step, 0, -1, -1, -1, 0, t, t + 1000, trace::OpKind::Host});
        w.write(trace::OpRecord{0, step, 1, -1, -1, rank, 7, t + 100, t + 900, trace::OpKind::Kernel, 0});
        if (rank == 0)
            for (int r = 0; r < 2; ++r)
                w.write(trace::RankStepRecord{step, r, 10.0 + 5 * r, 2.0, 12.0 + 5 * r, 3.0 - 0.01 * step, 1e6});
        w.write(trace::StepRecord{0, step, 3.0 - 0.01 * step + 0.1 * rank, NAN, 1e-3, 1.0, 12.0, 5e4, 0});
    }
    w.close();
}

}  // namespace

class RankFolderTest : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;
    QString job_;

private slots:
    void initTestCase() {
        QVERIFY(dir_.isValid());
        job_ = dir_.filePath("job");
        QVERIFY(QDir().mkpath(job_));
        write_rank(job_ + "/run.h5", 0);
        write_rank(job_ + "/run.rank1.h5", 1);
    }

    void findsTheRankTraces() {
        const RankFolder f = rank_folder(job_);
        QVERIFY2(f.error.isEmpty(), qPrintable(f.error));
        QCOMPARE(f.paths, QStringList({job_ + "/run.h5", job_ + "/run.rank1.h5"}));
        // Another file beside the job's: still the job.
        QFile::copy(job_ + "/run.h5", dir_.filePath("other.h5"));
        QVERIFY(QDir().mkpath(dir_.filePath("mixed")));
        for (const char* n : {"run.h5", "run.rank1.h5"}) QFile::copy(job_ + "/" + n, dir_.filePath("mixed/") + n);
        QFile::copy(job_ + "/run.h5", dir_.filePath("mixed/notes.h5"));
        QCOMPARE(rank_folder(dir_.filePath("mixed")).paths.size(), 2);
    }

    void refusesWhatIsNotOneJob() {
        QVERIFY(QDir().mkpath(dir_.filePath("empty")));
        QVERIFY(rank_folder(dir_.filePath("empty")).error.contains("no trace files"));
        QVERIFY(QDir().mkpath(dir_.filePath("two")));
        QFile::copy(job_ + "/run.h5", dir_.filePath("two/a.h5"));
        QFile::copy(job_ + "/run.h5", dir_.filePath("two/b.h5"));
        const RankFolder two = rank_folder(dir_.filePath("two"));
        QVERIFY2(two.error.contains("several runs (a, b)") && two.error.contains(dir_.filePath("two")), qPrintable(two.error));
        QVERIFY(QDir().mkpath(dir_.filePath("orphan")));
        QFile::copy(job_ + "/run.rank1.h5", dir_.filePath("orphan/run.rank1.h5"));
        QVERIFY(rank_folder(dir_.filePath("orphan")).error.contains("without rank 0's trace"));
        QVERIFY(rank_folder(dir_.filePath("none")).error.contains("no such folder"));
    }

    void opensAsOneJob() {
        SeriesStore store;
        StepCursor cursor;
        Selection selection;
        TraceFileLoader loader(&store);
        loader.openJob(rank_folder(job_).paths);
        QVERIFY(loader.wait(30000));
        QCoreApplication::processEvents();
        store.read([](const TraceData& d) {
            QCOMPARE(d.runs.size(), std::size_t(2));
            QCOMPARE(d.meta.runs[1].name, std::string("rank 1: baseline"));
            QCOMPARE(d.rank_runs.size(), std::size_t(2));
            QCOMPARE(d.rank_runs[1].rank, 1);
            QCOMPARE(d.rank_runs[1].run, 0);
            QCOMPARE(job_runs(d, 1), (std::vector<std::pair<int, int>>{{0, 0}, {1, 1}}));
            QCOMPARE(d.runs[1].steps[&trace::StepRecord::loss][0], 3.0 - 0.01 + 0.1);
            // The Health view's records: both ranks, every step.
            QCOMPARE(d.ranks.size(), std::size_t(2));
            QCOMPARE(d.ranks[1].size(), std::size_t(kSteps));
            QCOMPARE(d.ranks[1][&trace::RankStepRecord::compute_ms][0], 15.0f);
        });
        RankHealthModel health(&store);
        health.refresh();
        QCOMPARE(health.rowCount(), 2);
        // The Kernels view: a lane per rank and stream, each rank's kernel in its own.
        selection.setRun(0);
        auto set = std::make_unique<ViewSet>(&store, &cursor, &selection);
        cursor.setStep(5);
        auto* kernels = testing::show_view<KernelView>(*set, "kernels", QSize(1000, 700));
        QCOMPARE(kernels->timeline()->lanes(), QStringList({"rank 0 CPU thread 0", "rank 0 GPU 0 stream 7",
                                                            "rank 1 CPU thread 0", "rank 1 GPU 1 stream 7"}));
        for (StoreView* v : set->views()) v->hide();
    }

    void commandLineOpensTheFolder() {
        QProcess p;
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        env.insert("QT_QPA_PLATFORM", "offscreen");
        env.insert("XDG_CONFIG_HOME", dir_.filePath("config"));
        p.setProcessEnvironment(env);
        const QString png = dir_.filePath("kernels.png");
        p.start(FP8SCOPE_GUI, {"--screenshot", png, "--view", "kernels", "--step", "5", job_});
        QVERIFY(p.waitForFinished(90000));
        QCOMPARE(p.exitCode(), 0);
        QVERIFY(!QImage(png).isNull());
        // A folder that is not a job's: the message names it, and nothing is drawn.
        p.start(FP8SCOPE_GUI, {"--screenshot", dir_.filePath("two.png"), "--view", "loss", dir_.filePath("two")});
        QVERIFY(p.waitForFinished(90000));
        QVERIFY(p.exitCode() != 0);
        QVERIFY2(QString::fromUtf8(p.readAllStandardError()).contains("several runs"), "no message about the folder");
    }
};

QTEST_MAIN(RankFolderTest)
#include "test_rank_folder.moc"
