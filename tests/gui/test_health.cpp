// The Health view of a data-parallel job: the rank table's medians, slowest steps and
// flags against hand-computed values (rank 1 computes 30% longer: flagged, alone), the
// store's rank columns through a rewind, rank records from a trace file and from a live
// engine, the view's lines and rows of the flagged rank, and the one-line message of a
// single-process trace. The gradient sums: megabytes per step and the last measured error
// of compressed (BF16 or FP8) sums, float32 sums, and records from before the fields. With
// FP8SCOPE_SCREENSHOT_DIR set, the view is saved as PNG.
#include <QAbstractItemModelTester>
#include <QHeaderView>
#include <QScrollBar>
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

trace::TraceMeta job_meta(int world) {
    t::SyntheticSpec s;
    s.runs = 1;
    s.world_size = world;
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
            QCOMPARE(d.ranks[0].grad_bytes, (std::vector<float>{2e6f, 2e6f, 2e6f}));
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
            QCOMPARE(d.ranks[2].compute_ms, (std::vector<float>{99, 100, 111}));
            QCOMPARE(d.ranks[2].comm_ms.back(), 22.0f);
            QCOMPARE(d.ranks[1].size(), std::size_t(5));
        });
    }

    void aTraceFileFillsTheRankColumns() {
        QTemporaryDir dir;
        t::SyntheticSpec s;
        s.runs = 1;
        s.steps = 12;
        s.world_size = 2;
        const QString path = dir.filePath("job.h5");
        t::write_synthetic_trace(path, s);
        OpenTrace file(path.toStdString());
        QCOMPARE(file.meta().world_size, 2);
        SeriesStore store;
        const auto gen = store.reset(file.meta());
        file.readNew([&](TraceBatch&& b) { QVERIFY(store.append(gen, std::move(b))); });
        store.read([&](const TraceData& d) {
            QCOMPARE(d.ranks.size(), std::size_t(2));
            for (int k = 0; k < 2; ++k) {
                QCOMPARE(d.ranks[k].size(), std::size_t(12));
                for (std::int64_t step = 0; step < 12; ++step) {
                    QCOMPARE(d.ranks[k].compute_ms[step], float(t::compute_ms_of(k, step)));
                    QCOMPARE(d.ranks[k].comm_ms[step], float(t::comm_ms_of(k, step)));
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
        live::LiveServer server(e, "", job_meta(2), {});
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
            QCOMPARE(d.ranks[1].compute_ms, (std::vector<float>{130, 130, 130}));
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
