// The Health view of a data-parallel job: the rank table's medians, slowest steps and
// flags against hand-computed values (rank 1 computes 30% longer: flagged, alone), the
// store's rank columns through a rewind, rank records and the sums' type from a trace file
// and from a live engine, the view's lines and rows of the flagged rank, eight ranks with
// one slow, and the one-line message of a single-process trace. The gradient sums:
// megabytes per step and the last measured error; with the trace's type (float32, BF16,
// FP8 E4M3 or E5M2) the saving against float32, without it (older traces) a line that
// names none; records from before the fields. With FP8SCOPE_SCREENSHOT_DIR set, the view
// is saved as PNG.
#include <QAbstractItemModelTester>
#include <QHeaderView>
#include <QScrollBar>
#include <QSet>
#include <QTableView>
#include <QTemporaryDir>
#include <QTest>
#include <qcustomplot.h>

#include "live_server.h"
#include "models/events_model.h"
#include "models/live_source.h"
#include "models/model_roles.h"
#include "models/open_trace.h"
#include "models/rank_health_model.h"
#include "show_view.h"
#include "trace_file.h"
#include "widgets/event_markers.h"
#include "widgets/health_view.h"

using namespace fp8scope;
using namespace fp8scope::views;
namespace t = fp8scope::testing;

namespace {

// Four ranks over steps 1..5; rank 1's compute is 30% above the others' (median 130 vs 100)
// and it waits least in the all-reduce. step_ms = compute + comm + 1.
constexpr int kWorld = 4;
const double kCompute[kWorld][5] = {{100, 102, 98, 101, 99}, {130, 131, 129, 132, 128},
                                    {99, 100, 101, 100, 100}, {100, 101, 99, 100, 102}};
const double kComm[kWorld][5] = {{30, 29, 31, 31, 30}, {1, 2, 1, 3, 2}, {31, 30, 29, 32, 30}, {30, 30, 31, 29, 28}};

TraceBatch job_batch(double scale_all = 1.0) {
    TraceBatch b;
    for (int step = 1; step <= 5; ++step)
        for (int k = 0; k < kWorld; ++k) {
            const double compute = kCompute[k][step - 1] * scale_all, comm = kComm[k][step - 1];
            b.ranks.push_back({step, k, compute, comm, compute + comm + 1, 3.5});
        }
    return b;
}

trace::TraceMeta job_meta(int world, const std::string& grad_dtype = {}) {
    t::SyntheticSpec s;
    s.runs = 1;
    s.world_size = world;
    s.grad_dtype = grad_dtype;
    return t::synthetic_meta(s);
}

// Two ranks over steps 1..4 that put `bytes[rank][step - 1]` into the gradient sums;
// `error` is each rank's sum error at steps 1 and 3 (NaN: float32 sums, never measured).
const double kBytes[2][4] = {{2e6, 2e6, 2e6, 2e6}, {2e6, 2e6, 2.4e6, 3e6}};
TraceBatch grad_batch(const double (&error)[2][2]) {
    TraceBatch b;
    for (int step = 1; step <= 4; ++step)
        for (int k = 0; k < 2; ++k) {
            trace::RankStepRecord r{step, k, 100.0, 10.0, 111.0, 3.0, kBytes[k][step - 1], trace::kNone};
            if (step % 2) r.grad_error = error[k][step / 2];
            b.ranks.push_back(r);
        }
    return b;
}

// Two ranks over steps 1..4 that each put `bytes` into every step's sums; rank 0 measured
// `error` and rank 1 half of it at steps 1 and 3 (NaN: never measured).
TraceBatch sums_batch(double bytes, double error) {
    TraceBatch b;
    for (int step = 1; step <= 4; ++step)
        for (int k = 0; k < 2; ++k)
            b.ranks.push_back({step, k, 100.0, 10.0, 111.0, 3.0, bytes, step % 2 ? error / (1 + k) : trace::kNone});
    return b;
}

// Eight ranks over steps 1..6: rank r computes 100 + r ms plus step % 3 (median over
// steps 101 + r), rank 5 instead 127 ms plus step % 3 (median 128). Every rank waits in
// the all-reduce for rank 5: comm = 2 + (127 - own base), median 29 - r, rank 5's 2.
// A small model's FP8 sums: 31,000 bytes per rank and step, the error measured at step 1.
constexpr int kEight = 8, kSlow = 5;
double eight_base(int rank) { return rank == kSlow ? 127.0 : 100.0 + rank; }
TraceBatch eight_batch() {
    TraceBatch b;
    for (int step = 1; step <= 6; ++step)
        for (int k = 0; k < kEight; ++k) {
            const double compute = eight_base(k) + step % 3, comm = 2.0 + 127.0 - eight_base(k);
            b.ranks.push_back({step, k, compute, comm, compute + comm + 1, 3.0, 31000.0, step == 1 ? 0.0391 : trace::kNone});
        }
    b.events.push_back({-1, 0, EventKind::Health, "pre-flight: 8 ranks, GEMM 256^3 median 0.33 ms"});
    b.events.push_back({-1, 3, EventKind::Health, "straggler: rank 5 130.0 ms compute vs median 105.0 ms for 3 steps"});
    return b;
}

// The records in a store, with the Health view shown offscreen.
struct Shown {
    Shown(const t::SyntheticSpec& s, const QString& prefix) : Shown(t::synthetic_meta(s), t::synthetic_batch(s), prefix) {}
    Shown(trace::TraceMeta meta, TraceBatch batch, const QString& prefix) {
        store.append(store.reset(std::move(meta)), std::move(batch));
        set = t::open_view_set(store, cursor, selection);
        view = t::show_view<HealthView>(*set, "health", QSize(1200, 760), prefix);
    }
    ~Shown() { t::close_view_set(set); }
    SeriesStore store;
    StepCursor cursor;
    Selection selection;
    std::unique_ptr<ViewSet> set;
    HealthView* view = nullptr;
};

}  // namespace

class HealthTest : public QObject {
    Q_OBJECT

private slots:
    void flagsTheSlowRankAloneWithHandComputedMedians() {
        SeriesStore store;
        QVERIFY(store.append(store.reset(job_meta(kWorld)), job_batch()));
        RankHealthModel m(&store);
        QAbstractItemModelTester tester(&m, QAbstractItemModelTester::FailureReportingMode::QtTest);
        m.refresh();
        QVERIFY(m.dataParallel());
        QCOMPARE(m.rowCount(), kWorld);
        const double compute[kWorld] = {100, 130, 100, 100}, comm[kWorld] = {30, 2, 30, 30};
        for (int k = 0; k < kWorld; ++k) {
            QCOMPARE(m.data(m.index(k, RankHealthModel::MedianCompute), kValueRole).toDouble(), compute[k]);
            QCOMPARE(m.data(m.index(k, RankHealthModel::MedianComm), kValueRole).toDouble(), comm[k]);
            QCOMPARE(m.flagged(k), k == 1);
            const QString flag = m.data(m.index(k, RankHealthModel::Flag), Qt::DisplayRole).toString();
            QCOMPARE(flag, k == 1 ? QString("slow +30%") : QString());
            QCOMPARE(m.data(m.index(k, RankHealthModel::Rank), Qt::BackgroundRole).isValid(), k == 1);
        }
        QCOMPARE(m.medianOfRanks(), 100.0);  // of 100, 130, 100, 100
        QCOMPARE(m.slowRanks(), std::vector<int>{1});
        // Rank 1's slowest step: 132 + 3 + 1 = 136 ms at step 4.
        QCOMPARE(m.data(m.index(1, RankHealthModel::SlowestStep), Qt::DisplayRole).toString(), QString("4 (136 ms)"));
        QCOMPARE(m.data(m.index(1, RankHealthModel::SlowestStep), kStepRole).toLongLong(), 4);
        QCOMPARE(m.verdict(), QString("slow: rank 1 (130.0 ms, +30%) against the median rank's 100.0 ms compute per step"));
    }

    void aUniformlySlowJobFlagsNoRank() {
        SeriesStore store;
        trace::TraceMeta meta = job_meta(kWorld);
        const auto gen = store.reset(meta);
        TraceBatch b = job_batch();
        for (auto& r : b.ranks) r.compute_ms = 200.0 + r.step;  // every rank the same
        QVERIFY(store.append(gen, std::move(b)));
        RankHealthModel m(&store);
        m.refresh();
        QVERIFY(m.slowRanks().empty());
        QCOMPARE(m.medianOfRanks(), 203.0);
        QCOMPARE(m.verdict(), QString("all 4 ranks within 10% of the median rank's compute (203.0 ms per step)"));
    }

    void aSingleProcessHasNoRowsAndSaysSo() {
        SeriesStore store;
        QVERIFY(store.append(store.reset(job_meta(1)), job_batch()));  // records past the world are dropped
        store.read([](const TraceData& d) { QVERIFY(d.ranks.empty()); });
        RankHealthModel m(&store);
        m.refresh();
        QVERIFY(!m.dataParallel());
        QCOMPARE(m.rowCount(), 0);
        QCOMPARE(m.verdict(), QString("single-process run: no data-parallel health records"));
    }

    void compressedSumsShowTheMedianBytesAndTheLatestError() {
        SeriesStore store;
        const auto gen = store.reset(job_meta(2));
        QVERIFY(store.append(gen, grad_batch({{0.004, 0.002}, {0.004, 0.001}})));
        RankHealthModel m(&store);
        QAbstractItemModelTester tester(&m, QAbstractItemModelTester::FailureReportingMode::QtTest);
        m.refresh();
        // Rank 1's median of 2.0, 2.0, 2.4, 3.0 MB is 2.2 MB.
        QCOMPARE(m.data(m.index(0, RankHealthModel::GradMB), kValueRole).toDouble(), 2.0);
        QCOMPARE(m.data(m.index(1, RankHealthModel::GradMB), kValueRole).toDouble(), 2.2);
        QCOMPARE(m.data(m.index(1, RankHealthModel::GradMB), Qt::DisplayRole).toString(), QString("2.2"));
        // The latest measurement is step 3's (kept as float).
        QCOMPARE(m.data(m.index(0, RankHealthModel::SumError), kValueRole).toDouble(), double(0.002f));
        QCOMPARE(m.data(m.index(0, RankHealthModel::SumError), Qt::DisplayRole).toString(), QString("2.00e-03"));
        QCOMPARE(m.data(m.index(1, RankHealthModel::SumError), Qt::DisplayRole).toString(), QString("1.00e-03"));
        QVERIFY(m.data(m.index(0, RankHealthModel::SumError), Qt::ToolTipRole).toString().endsWith("at step 3"));
        // The median of ranks is 2.1 MB; of step 3's errors, the larger.
        QCOMPARE(m.gradientSums(), QString("gradient sums: 2.1 MB per rank per step in BF16 or FP8; error added "
                                           "2.00e-03 (last measured at step 3)"));

        // Rank 0 goes back to step 3 and is not measured there: step 1's error is its latest.
        TraceBatch again;
        again.ranks.push_back({3, 0, 100.0, 10.0, 111.0, 3.0, 2e6, trace::kNone});
        QVERIFY(store.append(gen, std::move(again)));
        store.read([](const TraceData& d) {
            QCOMPARE(d.ranks[0][&trace::RankStepRecord::grad_bytes], (std::vector<float>{2e6f, 2e6f, 2e6f}));
            QCOMPARE(d.ranks[0].error_step, std::vector<double>{1});
            QCOMPARE(d.ranks[1].error_step, (std::vector<double>{1, 3}));
        });
        m.refresh();
        QCOMPARE(m.data(m.index(0, RankHealthModel::SumError), Qt::DisplayRole).toString(), QString("4.00e-03"));
        QVERIFY(m.gradientSums().endsWith("error added 1.00e-03 (last measured at step 3)"));
    }

    void float32SumsShowNoErrorAndTheFloat32Line() {
        SeriesStore store;
        QVERIFY(store.append(store.reset(job_meta(2)), grad_batch({{NAN, NAN}, {NAN, NAN}})));
        RankHealthModel m(&store);
        m.refresh();
        for (int k = 0; k < 2; ++k) {
            QCOMPARE(m.data(m.index(k, RankHealthModel::SumError), Qt::DisplayRole).toString(), QString("\u2014"));
            QVERIFY(std::isnan(m.data(m.index(k, RankHealthModel::SumError), kValueRole).toDouble()));
        }
        QCOMPARE(m.data(m.index(0, RankHealthModel::GradMB), Qt::DisplayRole).toString(), QString("2.0"));
        QCOMPARE(m.gradientSums(), QString("gradient sums: 2.1 MB per rank per step in float32"));
    }

    void recordsWithoutTheGradientFieldsShowNoGradientLine() {
        SeriesStore store;
        QVERIFY(store.append(store.reset(job_meta(kWorld)), job_batch()));
        RankHealthModel m(&store);
        m.refresh();
        for (int k = 0; k < kWorld; ++k) {
            QVERIFY(std::isnan(m.data(m.index(k, RankHealthModel::GradMB), kValueRole).toDouble()));
            QCOMPARE(m.data(m.index(k, RankHealthModel::GradMB), Qt::DisplayRole).toString(), QString("\u2014"));
            QCOMPARE(m.data(m.index(k, RankHealthModel::SumError), Qt::DisplayRole).toString(), QString("\u2014"));
        }
        QCOMPARE(m.gradientSums(), QString());
    }

    // With the type known, the line names it and what it saves against float32's 4 bytes
    // a gradient (hand-computed: the median of ranks' median bytes, x2 or x4, minus it).
    void theSumTypeNamesTheSavingAgainstFloat32_data() {
        QTest::addColumn<QString>("grad_dtype");
        QTest::addColumn<double>("bytes");
        QTest::addColumn<double>("error");
        QTest::addColumn<QString>("line");
        QTest::addColumn<QString>("error_tip");
        auto row = [](const char* name, const char* type, double bytes, double error, const char* line, const char* tip) {
            QTest::newRow(name) << QString(type) << bytes << error << QString(line) << QString(tip);
        };
        const char* float32_tip = "not measured (float32 sums add none)";
        const char* neutral_tip = "relative L2 error the BF16 or FP8 sums added against float32 sums, measured at step 3";
        row("f32", "f32", 100.4e6, NAN, "Gradient sums in float32: 100.4 MB per rank per step", float32_tip);
        row("bf16", "bf16", 50.2e6, 4.1e-3,
            "Gradient sums in BF16: 50.2 MB per rank per step, half of float32's (saves 50.2 MB); last measured sum "
            "error 4.10e-03 at step 3",
            "relative L2 error the BF16 sums added against float32 sums, measured at step 3");
        row("e4m3", "e4m3", 25.1e6, 3.9e-2,
            "Gradient sums in FP8 E4M3: 25.1 MB per rank per step, a quarter of float32's (saves 75.3 MB); last "
            "measured sum error 3.90e-02 at step 3",
            "relative L2 error the FP8 E4M3 sums added against float32 sums, measured at step 3");
        row("e5m2", "e5m2", 25.1e6, 7.8e-2,
            "Gradient sums in FP8 E5M2: 25.1 MB per rank per step, a quarter of float32's (saves 75.3 MB); last "
            "measured sum error 7.80e-02 at step 3",
            "relative L2 error the FP8 E5M2 sums added against float32 sums, measured at step 3");
        // A small model's sums keep two significant digits: 3 x 0.031 MB saved.
        row("e4m3 small", "e4m3", 31e3, 3.9e-2,
            "Gradient sums in FP8 E4M3: 0.031 MB per rank per step, a quarter of float32's (saves 0.093 MB); last "
            "measured sum error 3.90e-02 at step 3",
            "relative L2 error the FP8 E4M3 sums added against float32 sums, measured at step 3");
        // Compressed sums not measured yet (--grad-measure-every past the steps so far).
        row("bf16 unmeasured", "bf16", 50.2e6, NAN,
            "Gradient sums in BF16: 50.2 MB per rank per step, half of float32's (saves 50.2 MB)", "not measured yet");
        // A trace from before grad_dtype, or a type this build does not know: the neutral line.
        row("not recorded", "", 25.1e6, 3.9e-2,
            "gradient sums: 25.1 MB per rank per step in BF16 or FP8; error added 3.90e-02 (last measured at step 3)",
            neutral_tip);
        row("not recorded, float32", "", 100.4e6, NAN, "gradient sums: 100.4 MB per rank per step in float32",
            float32_tip);
        row("unknown type", "e8m0", 25.1e6, 3.9e-2,
            "gradient sums: 25.1 MB per rank per step in BF16 or FP8; error added 3.90e-02 (last measured at step 3)",
            neutral_tip);
    }
    void theSumTypeNamesTheSavingAgainstFloat32() {
        QFETCH(QString, grad_dtype);
        QFETCH(double, bytes);
        QFETCH(double, error);
        QFETCH(QString, line);
        QFETCH(QString, error_tip);
        SeriesStore store;
        QVERIFY(store.append(store.reset(job_meta(2, grad_dtype.toStdString())), sums_batch(bytes, error)));
        RankHealthModel m(&store);
        QAbstractItemModelTester tester(&m, QAbstractItemModelTester::FailureReportingMode::QtTest);
        m.refresh();
        QCOMPARE(m.gradientSums(), line);
        QCOMPARE(m.data(m.index(0, RankHealthModel::SumError), Qt::ToolTipRole).toString(), error_tip);
        QCOMPARE(m.data(m.index(1, RankHealthModel::GradMB), kValueRole).toDouble(), float(bytes) / 1e6);
    }

    // FP8 sums measured against BF16 shadow sums at steps 1 and 3: the latest figures join
    // the gradient line and the error's tooltip; a scaling mismatch event gets a red line
    // of its own and a row among the health events.
    void fp8SumsShowTheirErrorAgainstBf16SumsAndAScalingMismatchItsLine() {
        TraceBatch b = sums_batch(25.1e6, 3.9e-2);
        for (trace::RankStepRecord& r : b.ranks)
            if (r.step == 1 || r.step == 3) {
                r.grad_snr_db = r.step == 1 ? 31.0 : 29.4;
                r.grad_underflow_pct = r.step == 1 ? 0.5 : 0.25;
                r.grad_overflow_pct = 0.0;
            }
        const std::string mismatch = "delayed scaling state of blocks.0.mlp.fc2 dy differs on rank(s) 1 from rank(s) 0 "
                                     "(amax history or scale not bitwise equal)";
        b.events.push_back({-1, 2, EventKind::ScalingMismatch, mismatch});
        b.events.push_back({-1, 4, EventKind::Health, "straggler: rank 1 130.0 ms compute vs median 100.0 ms"});
        Shown shown(job_meta(2, "e4m3"), std::move(b), "fp8_sums_");
        const HealthView* v = shown.view;
        QCOMPARE(v->gradientSums(), QString("Gradient sums in FP8 E4M3: 25.1 MB per rank per step, a quarter of "
                                            "float32's (saves 75.3 MB); last measured sum error 3.90e-02 at step 3; "
                                            "against BF16 sums: SNR 29.4 dB, underflow 0.25%, overflow 0% (step 3)"));
        QCOMPARE(v->ranks().data(v->ranks().index(0, RankHealthModel::SumError), Qt::ToolTipRole).toString(),
                 QString("relative L2 error the FP8 E4M3 sums added against float32 sums, measured at step 3; against "
                         "BF16 sums at step 3: SNR 29.4 dB, underflow 0.25%, overflow 0%"));
        QCOMPARE(v->scalingState(),
                 QString("Delayed scaling state differs across ranks: 1 finding(s), the first at step 2: ") +
                     QString::fromStdString(mismatch));
        const EventsModel& events = v->healthEvents();
        QCOMPARE(events.rowCount(), 2);
        QCOMPARE(events.data(events.index(0, EventsModel::Kind), Qt::DisplayRole).toString(), QString("scaling_mismatch"));
        QCOMPARE(events.data(events.index(1, EventsModel::Kind), Qt::DisplayRole).toString(), QString("health"));

        // Without the event, no line; BF16 sums carry no FP8 figures.
        Shown clean(job_meta(2, "bf16"), sums_batch(50.2e6, 4.1e-3), "bf16_sums_");
        QCOMPARE(clean.view->scalingState(), QString());
        QVERIFY(!clean.view->gradientSums().contains("against BF16"));
    }

    // An elastic job that lost rank 2 and took its replacement in: an amber line per change
    // says when, which rank, the new world and the steps lost; the events are among the
    // health events and marked on the plots.
    void aWorldChangeGetsItsLineAndARow() {
        TraceBatch b = sums_batch(25.1e6, 3.9e-2);
        const std::string change = "lost rank 2; world 4 -> 3; failed in step 10, restored step 8 (2 steps lost); "
                                   "rank 2 closed the connection (it exited or failed)";
        const std::string join = "rank 2 joined; world 3 -> 4 at step 11";
        b.events.push_back({-1, 8, EventKind::WorldChanged, change});
        b.events.push_back({-1, 11, EventKind::WorldChanged, join});
        Shown shown(job_meta(2, "f32"), std::move(b), "world_changed_");
        const HealthView* v = shown.view;
        QCOMPARE(v->worldChanges(), QString("The job's world changed (elastic: ranks lost or joined):\nstep 8: ") +
                                        QString::fromStdString(change) + "\nstep 11: " + QString::fromStdString(join));
        const EventsModel& events = v->healthEvents();
        QCOMPARE(events.rowCount(), 2);
        QCOMPARE(events.data(events.index(0, EventsModel::Kind), Qt::DisplayRole).toString(), QString("world_changed"));
        QCOMPARE(events.data(events.index(1, EventsModel::Kind), Qt::DisplayRole).toString(), QString("world_changed"));
        int markers = 0;
        for (int i = 0; i < v->plot()->itemCount(); ++i)
            markers += v->plot()->item(i)->objectName().startsWith("event_marker") &&
                       qobject_cast<QCPItemStraightLine*>(v->plot()->item(i)) != nullptr;
        QCOMPARE(markers, 4);  // each on the compute and the comm plot

        Shown clean(job_meta(2, "f32"), sums_batch(25.1e6, 3.9e-2), "world_same_");
        QCOMPARE(clean.view->worldChanges(), QString());
    }

    // Eight ranks: the one slow rank alone is flagged, every row holds its rank's medians,
    // the table shows all eight rows and every column without scrolling, and each rank has
    // its lines, the slow one's thick and red.
    void eightRanksFlagTheSlowOneAndShowEveryRow() {
        Shown shown(job_meta(kEight, "e4m3"), eight_batch(), "eight_rank_");
        const HealthView* v = shown.view;
        const RankHealthModel& m = v->ranks();
        QCOMPARE(m.rowCount(), kEight);
        QCOMPARE(m.slowRanks(), std::vector<int>{kSlow});
        // Medians of ranks: 101, 102, 103, 104, 105, 128, 107, 108 -> (104 + 105) / 2.
        QCOMPARE(m.medianOfRanks(), 104.5);
        QCOMPARE(v->verdict(), QString("slow: rank 5 (128.0 ms, +22%) against the median rank's 104.5 ms compute per step"));
        for (int k = 0; k < kEight; ++k) {
            const double compute = k == kSlow ? 128.0 : 101.0 + k, comm = k == kSlow ? 2.0 : 29.0 - k;
            QCOMPARE(m.data(m.index(k, RankHealthModel::Rank), Qt::DisplayRole).toInt(), k);
            QCOMPARE(m.data(m.index(k, RankHealthModel::MedianCompute), kValueRole).toDouble(), compute);
            QCOMPARE(m.data(m.index(k, RankHealthModel::MedianComm), kValueRole).toDouble(), comm);
            QCOMPARE(m.data(m.index(k, RankHealthModel::GradMB), Qt::DisplayRole).toString(), QString("0.031"));
            QCOMPARE(m.data(m.index(k, RankHealthModel::SumError), Qt::DisplayRole).toString(), QString("3.91e-02"));
            QCOMPARE(m.data(m.index(k, RankHealthModel::Flag), Qt::DisplayRole).toString(),
                     k == kSlow ? QString("slow +22%") : QString());
        }
        // Rank 5's slowest step: step 2's 127 + 2 compute, 2 comm and 1 -> 132 ms.
        QCOMPARE(m.data(m.index(kSlow, RankHealthModel::SlowestStep), Qt::DisplayRole).toString(), QString("2 (132 ms)"));
        QCOMPARE(v->gradientSums(), QString("Gradient sums in FP8 E4M3: 0.031 MB per rank per step, a quarter of "
                                            "float32's (saves 0.093 MB); last measured sum error 3.91e-02 at step 1"));

        QTableView* table = nullptr;
        for (QTableView* t : v->findChildren<QTableView*>())
            if (t->model() == &m) table = t;
        QVERIFY(table);
        // The scroll area shows or hides its bars on its next layout pass, as in the app.
        QCoreApplication::processEvents();
        QVERIFY(!table->verticalScrollBar()->isVisible());
        QVERIFY(!table->horizontalScrollBar()->isVisible());
        QCOMPARE(table->rowViewportPosition(0), 0);
        QVERIFY(table->rowViewportPosition(kEight - 1) + table->rowHeight(kEight - 1) <= table->viewport()->height());
        QVERIFY(table->horizontalHeader()->length() <= table->viewport()->width());
        QVERIFY(table->mapTo(v, QPoint(table->width(), 0)).x() <= v->width());

        QCOMPARE(v->plot()->graphCount(), 2 * kEight);  // compute and comm of each rank
        QCOMPARE(v->plot()->legend->itemCount(), kEight);
        QSet<QString> names;
        for (int i = 0; i < v->plot()->graphCount(); ++i) {
            const QCPGraph* g = v->plot()->graph(i);
            names.insert(g->name());
            const bool slow = g->name() == "rank 5 (slow)";
            QCOMPARE(g->pen().widthF() > 2.0, slow);
            if (slow) QCOMPARE(g->pen().color(), QColor(0xd62728));
            QCOMPARE(g->dataCount(), 6);
        }
        QCOMPARE(names.size(), kEight);
        QVERIFY(names.contains("rank 0") && names.contains("rank 7") && names.contains("rank 5 (slow)"));
        // The steps run 1..6; the pre-flight finding at step 0 is on both step axes, not cut off.
        for (QCPAxisRect* r : {v->computeRect(), v->commRect()}) {
            QCOMPARE(r->axis(QCPAxis::atBottom)->range().lower, 0.0);
            QCOMPARE(r->axis(QCPAxis::atBottom)->range().upper, 6.0);
        }
        QCOMPARE(v->healthEvents().rowCount(), 2);
    }

    void theViewShowsTheGradientSumsLineAndTheWholeTable() {
        // Two ranks in BF16 or FP8 over steps 1..20, the error measured every 10 steps.
        TraceBatch b;
        for (int step = 1; step <= 20; ++step)
            for (int k = 0; k < 2; ++k) {
                const double error = step == 10 ? 0.0031 : step == 20 ? 0.00225 : trace::kNone;
                b.ranks.push_back({step, k, 100.0 + 30 * k, 40.0 - 30 * k, 141.0, 3.0, 4063.1e6, error});
            }
        Shown shown(job_meta(2), std::move(b), "bf16_");
        const HealthView* v = shown.view;
        QCOMPARE(v->gradientSums(), QString("gradient sums: 4063.1 MB per rank per step in BF16 or FP8; error added "
                                            "2.25e-03 (last measured at step 20)"));
        const RankHealthModel& m = v->ranks();
        QCOMPARE(m.data(m.index(1, RankHealthModel::GradMB), Qt::DisplayRole).toString(), QString("4063.1"));
        QCOMPARE(m.data(m.index(1, RankHealthModel::SumError), Qt::DisplayRole).toString(), QString("2.25e-03"));
        // Every column and row of the rank table shows at the default size.
        QTableView* table = nullptr;
        for (QTableView* t : v->findChildren<QTableView*>())
            if (t->model() == &m) table = t;
        QVERIFY(table);
        QVERIFY(!table->horizontalScrollBar()->isVisible());
        QVERIFY(!table->verticalScrollBar()->isVisible());
        QVERIFY(table->horizontalHeader()->length() <= table->viewport()->width());
        QVERIFY(table->mapTo(v, QPoint(table->width(), 0)).x() <= v->width());
    }

    void aRewindDropsTheRanksLaterSteps() {
        SeriesStore store;
        const auto gen = store.reset(job_meta(kWorld));
        QVERIFY(store.append(gen, job_batch()));
        TraceBatch again;
        again.ranks.push_back({3, 2, 111.0, 22.0, 134.0, 3.0});  // rank 2 went back to step 3
        QVERIFY(store.append(gen, std::move(again)));
        store.read([](const TraceData& d) {
            QCOMPARE(d.ranks[2].step, (std::vector<double>{1, 2, 3}));
            QCOMPARE(d.ranks[2][&trace::RankStepRecord::compute_ms], (std::vector<float>{99, 100, 111}));
            QCOMPARE(d.ranks[2][&trace::RankStepRecord::comm_ms].back(), 22.0f);
            QCOMPARE(d.ranks[1].size(), std::size_t(5));
        });
    }

    void aTraceFileFillsTheRankColumns() {
        QTemporaryDir dir;
        t::SyntheticSpec s;
        s.runs = 1;
        s.steps = 12;
        s.world_size = 2;
        s.grad_dtype = "e5m2";
        const QString path = dir.filePath("job.h5");
        t::write_synthetic_trace(path, s);
        OpenTrace file(path.toStdString());
        QCOMPARE(file.meta().world_size, 2);
        QCOMPARE(file.meta().grad_dtype, std::string("e5m2"));
        SeriesStore store;
        const auto gen = store.reset(file.meta());
        file.readNew([&](TraceBatch&& b) { QVERIFY(store.append(gen, std::move(b))); });
        store.read([&](const TraceData& d) {
            QCOMPARE(d.ranks.size(), std::size_t(2));
            for (int k = 0; k < 2; ++k) {
                QCOMPARE(d.ranks[k].size(), std::size_t(12));
                for (std::int64_t step = 0; step < 12; ++step) {
                    QCOMPARE(d.ranks[k][&trace::RankStepRecord::compute_ms][step], float(t::compute_ms_of(k, step)));
                    QCOMPARE(d.ranks[k][&trace::RankStepRecord::comm_ms][step], float(t::comm_ms_of(k, step)));
                }
            }
            int health = 0;
            for (const auto& e : d.events) health += e.kind == EventKind::Health;
            QCOMPARE(health, 2);
        });
    }

    void aLiveEngineFeedsTheRankColumns() {
        QTemporaryDir dir;
        live::Endpoint e = live::parse_endpoint(("unix:" + dir.filePath("engine.sock")).toStdString());
        live::LiveServer server(e, "", job_meta(2, "bf16"), {});
        SeriesStore store;
        LiveSource source(&store);
        source.attach(QString::fromStdString(server.endpoint().to_string()), QString());
        QTRY_VERIFY_WITH_TIMEOUT(source.isAttached() && server.clients() == 1, 10000);
        for (int step = 1; step <= 3; ++step)
            for (int k = 0; k < 2; ++k) server.publish(trace::RankStepRecord{step, k, 100.0 + 30 * k, 10.0, 111.0 + 30 * k, 3.0, 0.0, trace::kNone});
        QTRY_VERIFY_WITH_TIMEOUT(store.read([](const TraceData& d) { return d.ranks.size() == 2 && d.ranks[1].size() == 3; }),
                                 10000);
        store.read([](const TraceData& d) {
            QCOMPARE(d.meta.world_size, 2);
            QCOMPARE(d.meta.grad_dtype, std::string("bf16"));
            QCOMPARE(d.ranks[1][&trace::RankStepRecord::compute_ms], (std::vector<float>{130, 130, 130}));
            QCOMPARE(d.ranks[0].step, (std::vector<double>{1, 2, 3}));
        });
        source.close();
    }

    void theViewDrawsTheSlowRankThickAndRed() {
        t::SyntheticSpec s;
        s.world_size = 2;
        Shown shown(s, "two_rank_");
        const HealthView* v = shown.view;
        QVERIFY(v->plotsShown());
        QVERIFY(v->verdict().startsWith("slow: rank 1 ("));
        QVERIFY(v->ranks().flagged(1));
        QVERIFY(!v->ranks().flagged(0));
        QCOMPARE(v->plot()->graphCount(), 4);  // compute and comm of each rank
        int thick = 0;
        for (int i = 0; i < v->plot()->graphCount(); ++i) {
            QCPGraph* g = v->plot()->graph(i);
            const bool slow = g->name() == "rank 1 (slow)";
            QVERIFY(slow || g->name() == "rank 0");
            QCOMPARE(g->pen().widthF() > 2.0, slow);
            if (slow) QCOMPARE(g->pen().color(), QColor(0xd62728));
            thick += slow;
        }
        QCOMPARE(thick, 2);
        QCOMPARE(v->gradientSums(), QString());  // the synthetic records carry no gradient bytes
        QCOMPARE(v->healthEvents().rowCount(), 2);
        QCOMPARE(v->healthEvents().data(v->healthEvents().index(1, EventsModel::Detail), Qt::DisplayRole).toString(),
                 QString("straggler: rank 1 158.0 ms compute vs median 123.0 ms for 3 steps"));
        QVERIFY(event_marker_count(v->plot()) >= 2);  // health events marked on the step plots
        // The Events view lists them too.
        EventsModel all(&shown.store);
        all.refresh();
        int health = 0;
        for (int r = 0; r < all.rowCount(); ++r) health += all.data(all.index(r, EventsModel::Kind), Qt::DisplayRole) == "health";
        QCOMPARE(health, 2);
    }

    void aSingleProcessTraceShowsTheMessageNotPlots() {
        Shown shown(t::SyntheticSpec{}, "one_process_");  // one process
        QVERIFY(!shown.view->plotsShown());
        QCOMPARE(shown.view->verdict(), QString("single-process run: no data-parallel health records"));
    }
};

QTEST_MAIN(HealthTest)
#include "test_health.moc"
