// A large trace in the GUI: it opens as an overview (the newest steps whole, the earlier
// ones decimated with their spikes and NaN losses kept), a zoom reads its range at full
// detail and puts the range it left back to decimated, and the Loss view keeps the zoom
// while the detail arrives. The Amax view draws the amax of the whole run (decimated
// before the newest steps, its first step and its spike kept) and reads its zoom at full
// detail too. The Layers view reads the amax and scale of a cursor step in the decimated
// steps whole, and the Kernels view its kernel sums.
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>
#include <cmath>
#include <map>
#include <tuple>

#include "models/rank_health_model.h"
#include "models/trace_file_loader.h"
#include "show_view.h"
#include "trace_writer.h"
#include "widgets/amax_view.h"
#include "widgets/health_view.h"
#include "widgets/kernel_view.h"
#include "widgets/layers_view.h"
#include "models/model_roles.h"
#include "widgets/step_cost_plot.h"
#include "widgets/loss_view.h"
#include <qcustomplot.h>

using namespace fp8scope;
using namespace fp8scope::views;

namespace {

constexpr int kRuns = 2;
constexpr std::int64_t kSteps = 30000, kSpike = 12345, kNanStep = 22222;

double loss_of(int run, std::int64_t step) {
    if (run == 1 && step == kNanStep) return NAN;
    return 3.0 + std::sin(0.01 * step) + 0.1 * run + (run == 0 && step == kSpike ? 10.0 : 0.0);
}

// The amax of slot `slot` of `run` at `step`: a slow wave, a one-step spike and a NaN.
constexpr std::int64_t kAmaxSpike = 7777, kAmaxNan = 15555;
float amax_of(int run, std::int64_t step, int slot) {
    if (step == kAmaxNan && slot == 0) return NAN;
    return static_cast<float>(1.0 + 0.5 * std::sin(0.001 * step) + 0.1 * slot + 0.01 * run +
                              (step == kAmaxSpike ? 100.0 : 0.0));
}
constexpr int kSlots = trace::kOperandsPerLinear;  // one linear
constexpr std::int64_t kCaptureEvery = 5000;

// A rank's compute time: a one-step spike at kAmaxSpike too.
double compute_of(int rank, std::int64_t step) { return 90.0 + rank + step % 11 + (step == kAmaxSpike ? 400.0 : 0.0); }

// The device time of the step's GEMM kernel sum: a one-step spike at kAmaxSpike too.
std::int64_t kernel_ns_of(int run, std::int64_t step) { return 1000 + step % 13 + run + (step == kAmaxSpike ? 50000 : 0); }
// The step's second kernel sum, a cast: its calls, device time and longest call vary by step.
trace::KernelStepRecord cast_sum_of(int run, std::int64_t step) {
    const std::int64_t calls = 1 + step % 3;
    return {run, step, 2, 0, trace::OpKind::Kernel, 0, calls, 300 + step % 7 + 2 * run, 50, 200 + step % 5 + run, 0};
}

void write_trace(const QString& path) {
    trace::TraceMeta m;
    m.tool_version = "test";
    m.runs = {{"baseline", "baseline"}, {"delayed", "delayed"}};
    m.training_recipes = {"baseline", "delayed"};
    m.linears = {{"blocks.0.mlp.fc1", 0, 64, 256}};
    m.ops = {"fprop", "sm90_gemm_kernel", "cast_transpose_kernel"};
    m.world_size = 2;  // rank 0 of a data-parallel job: every rank's step times
    trace::TraceWriter w(path.toStdString(), m);
    for (std::int64_t step = 1; step <= kSteps; ++step) {
        for (int run = 0; run < kRuns; ++run) {
            trace::ScalingRecord sc{run, step, {}, {}};
            for (int slot = 0; slot < kSlots; ++slot) {
                sc.amax.push_back(amax_of(run, step, slot));
                sc.scale.push_back(448.0f / amax_of(run, step, slot));
            }
            w.write(std::move(sc));
            if (step % kCaptureEvery == 1) {  // an operand's figures at capture steps
                trace::OperandRecord o;
                o.key = {run, step, 0, Gemm::Fprop, Operand::X};
                o.stats.amax = amax_of(run, step, 0);
                w.write(std::move(o));
            }
            w.write(trace::KernelStepRecord{run, step, 1, 0, trace::OpKind::Kernel, 0, 2, kernel_ns_of(run, step), 100, 900, 0});
            w.write(cast_sum_of(run, step));
            w.write(trace::StepRecord{run, step, loss_of(run, step), NAN, 1e-3, 1.0, 100.0 + step % 7, 5e4, run});
        }
        for (int rank = 0; rank < 2; ++rank) w.write(trace::RankStepRecord{step, rank, compute_of(rank, step), 10.0, 100.0 + rank});
    }
    w.close();
}

// A graph's points at steps in [first, last] (key, value).
std::vector<std::pair<double, double>> points_of(QCPGraph* g, double first, double last) {
    std::vector<std::pair<double, double>> out;
    for (auto it = g->data()->constBegin(); it != g->data()->constEnd(); ++it)
        if (it->key >= first && it->key <= last) out.push_back({it->key, it->value});
    return out;
}

// The rows of `run` at steps in [first, last].
std::vector<std::pair<double, double>> rows_in(const SeriesStore& store, int run, double first, double last) {
    return store.read([&](const TraceData& d) {
        std::vector<std::pair<double, double>> out;
        const StepColumns& c = d.runs[run].steps;
        for (std::size_t i = 0; i < c.size(); ++i)
            if (c.step[i] >= first && c.step[i] <= last) out.push_back({c.step[i], c[&trace::StepRecord::loss][i]});
        return out;
    });
}

bool whole(const std::vector<std::pair<double, double>>& rows, int run, std::int64_t first, std::int64_t last) {
    if (rows.size() != static_cast<std::size_t>(last - first + 1)) return false;
    for (std::size_t i = 0; i < rows.size(); ++i) {
        const std::int64_t step = first + static_cast<std::int64_t>(i);
        const double want = loss_of(run, step);
        if (rows[i].first != static_cast<double>(step) || !(rows[i].second == want || (std::isnan(want) && std::isnan(rows[i].second))))
            return false;
    }
    return true;
}

}  // namespace

class LargeTraceTest : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;
    QString path_;

    void open(TraceFileLoader& loader) {
        loader.setLargeStepRows(1000);
        loader.open(path_);
        QVERIFY(loader.wait(30000));
        QCoreApplication::processEvents();
    }

    // A store, a loader that opened the trace as an overview, and the views over them.
    struct Views {
        SeriesStore store;
        StepCursor cursor;
        Selection selection;
        TraceFileLoader loader{&store};
        std::unique_ptr<ViewSet> set;
    };
    std::unique_ptr<Views> openViews() {
        auto w = std::make_unique<Views>();
        open(w->loader);
        w->set = std::make_unique<ViewSet>(&w->store, &w->cursor, &w->selection);
        return w;
    }

private slots:
    void initTestCase() {
        QVERIFY(dir_.isValid());
        path_ = dir_.filePath("long.h5");
        write_trace(path_);
    }

    void opensAsAnOverview() {
        SeriesStore store;
        TraceFileLoader loader(&store);
        open(loader);
        for (int run = 0; run < kRuns; ++run) {
            const auto all = rows_in(store, run, -1e18, 1e18);
            QVERIFY2(all.size() < kSteps * 2 / 3, qPrintable(QString::number(all.size())));  // decimated
            for (std::size_t i = 1; i < all.size(); ++i) QVERIFY(all[i - 1].first < all[i].first);
            QCOMPARE(all.front().first, 1.0);
            // The newest steps whole.
            QVERIFY(whole(rows_in(store, run, kSteps - 1999, kSteps), run, kSteps - 1999, kSteps));
        }
        // The operand figures of every capture step, those before the newest steps too.
        const auto captures = store.read([](const TraceData& d) { return d.runs[1].capture_steps; });
        QCOMPARE(captures, (std::vector<std::int64_t>{1, 5001, 10001, 15001, 20001, 25001}));
        const double amax = store.read([](const TraceData& d) {
            return d.runs[1].operand_at(10001, {0, Gemm::Fprop, Operand::X})->figures[&TensorStats::amax];
        });
        QCOMPARE(amax, double(amax_of(1, 10001, 0)));
        // The ranks' figures are of the newest steps, and the Health view's verdict says so.
        RankHealthModel health(&store);
        health.refresh();
        QVERIFY2(health.verdict().endsWith("(of steps 28001-30000 read whole: a large trace's newest and those a zoom "
                                           "shows; the figures below are of these)"),
                 qPrintable(health.verdict()));
        // The spike and the NaN loss are kept, with their values.
        const auto spike = rows_in(store, 0, kSpike, kSpike);
        QCOMPARE(spike.size(), std::size_t(1));
        QCOMPARE(spike[0].second, loss_of(0, kSpike));
        const auto nan = rows_in(store, 1, kNanStep, kNanStep);
        QCOMPARE(nan.size(), std::size_t(1));
        QVERIFY(std::isnan(nan[0].second));
        // A trace below the threshold opens whole.
        SeriesStore all;
        TraceFileLoader plain(&all);
        plain.open(path_);
        QVERIFY(plain.wait(30000));
        QVERIFY(!plain.showSteps(1, 10));
        QVERIFY(whole(rows_in(all, 0, 1, kSteps), 0, 1, kSteps));
    }

    void zoomReadsFullDetail() {
        SeriesStore store;
        TraceFileLoader loader(&store);
        open(loader);
        QVERIFY(loader.showSteps(10000, 10999));
        QVERIFY(loader.wait(30000));
        for (int run = 0; run < kRuns; ++run) QVERIFY(whole(rows_in(store, run, 10000, 10999), run, 10000, 10999));
        QVERIFY(loader.showSteps(22000, 22500));
        QVERIFY(loader.wait(30000));
        for (int run = 0; run < kRuns; ++run) {
            QVERIFY(whole(rows_in(store, run, 22000, 22500), run, 22000, 22500));
            QVERIFY(rows_in(store, run, 10000, 10999).size() < 1000);  // decimated again
            QVERIFY(whole(rows_in(store, run, kSteps - 1999, kSteps), run, kSteps - 1999, kSteps));
        }
        // Zoomed out past the detail limit: decimated everywhere but the newest steps.
        QVERIFY(loader.showSteps(0, kSteps + TraceFileLoader::kDetailSteps));
        QVERIFY(loader.wait(30000));
        QVERIFY(rows_in(store, 0, 22000, 22500).size() < 501);
    }

    void lossViewKeepsTheZoom() {
        auto w = openViews();
        auto& [store, cursor, selection, loader, set] = *w;
        auto* loss = testing::show_view<LossView>(*set, "loss", QSize(900, 700));
        connect(loss, &LossView::stepsShown, &loader, &TraceFileLoader::showSteps);
        QCPAxis* x = loss->lossRect()->axis(QCPAxis::atBottom);
        x->setRange(5000, 5999);
        QSignalSpy shown(loss, &LossView::stepsShown);
        QVERIFY(shown.wait(2000));
        QCOMPARE(shown.at(0).at(0).toLongLong(), 5000);
        QCOMPARE(shown.at(0).at(1).toLongLong(), 5999);
        QVERIFY(loader.wait(30000));
        set->refreshNow();
        QVERIFY(whole(rows_in(store, 1, 5000, 5999), 1, 5000, 5999));
        QCOMPARE(x->range().lower, 5000.0);
        QCOMPARE(x->range().upper, 5999.0);
        QCOMPARE(loss->speedRect()->axis(QCPAxis::atBottom)->range().upper, 5999.0);
        // The plotted loss holds every step of the zoom.
        QCPGraph* g = loss->plot()->graph(0);
        int in_zoom = 0;
        for (auto it = g->data()->constBegin(); it != g->data()->constEnd(); ++it) in_zoom += it->key >= 5000 && it->key <= 5999;
        QCOMPARE(in_zoom, 1000);
        for (StoreView* v : set->views()) v->hide();
    }

    void amaxViewShowsTheWholeRun() {
        auto w = openViews();
        auto& [store, cursor, selection, loader, set] = *w;
        selection.setRun(1);
        selection.setOperand({0, Gemm::Fprop, Operand::X});  // slot 0
        auto* amax = testing::show_view<AmaxView>(*set, "amax", QSize(900, 600));
        connect(amax, &StoreView::stepsShown, &loader, &TraceFileLoader::showSteps);
        QCOMPARE(amax->operandCount(), 1);
        QCPGraph* g = amax->graph(0, AmaxView::AmaxGraph);
        // Decimated before the newest 2,000 steps, but from the run's first step on, with
        // the spike and the NaN (a gap) kept, and every one of the newest steps.
        const auto all = points_of(g, -1e18, 1e18);
        QVERIFY2(all.size() < kSteps / 2, qPrintable(QString::number(all.size())));
        QCOMPARE(all.front().first, 1.0);
        QCOMPARE(all.front().second, double(amax_of(1, 1, 0)));
        const auto spike = points_of(g, kAmaxSpike, kAmaxSpike);
        QCOMPARE(spike.size(), std::size_t(1));
        QCOMPARE(spike[0].second, double(amax_of(1, kAmaxSpike, 0)));
        const auto nan = points_of(g, kAmaxNan, kAmaxNan);
        QCOMPARE(nan.size(), std::size_t(1));
        QVERIFY(std::isnan(nan[0].second));
        QCOMPARE(points_of(g, kSteps - 1999, kSteps).size(), std::size_t(2000));
        // A zoom reads its steps at full detail and stays.
        QCPAxis* x = amax->plot()->xAxis;
        QSignalSpy shown(amax, &StoreView::stepsShown);
        x->setRange(3000, 3999);
        QVERIFY(shown.wait(2000));
        QCOMPARE(shown.at(0).at(0).toLongLong(), 3000);
        QVERIFY(loader.wait(30000));
        set->refreshNow();
        g = amax->graph(0, AmaxView::AmaxGraph);
        const auto zoomed = points_of(g, 3000, 3999);
        QCOMPARE(zoomed.size(), std::size_t(1000));
        for (std::size_t i = 0; i < zoomed.size(); ++i) {
            QCOMPARE(zoomed[i].first, 3000.0 + double(i));
            QCOMPARE(zoomed[i].second, double(amax_of(1, 3000 + std::int64_t(i), 0)));
        }
        QCOMPARE(x->range().lower, 3000.0);
        QCOMPARE(x->range().upper, 3999.0);
        for (StoreView* v : set->views()) v->hide();
    }

    void healthViewShowsTheWholeRun() {
        auto w = openViews();
        auto& [store, cursor, selection, loader, set] = *w;
        auto* health = testing::show_view<HealthView>(*set, "health", QSize(1000, 800));
        connect(health, &StoreView::stepsShown, &loader, &TraceFileLoader::showSteps);
        // Rank 0's compute: from step 1 on, decimated but for the newest steps, its spike kept.
        QCPGraph* g = health->plot()->graph(0);
        QVERIFY(g->name().startsWith("rank 0"));
        const auto all = points_of(g, -1e18, 1e18);
        QVERIFY2(all.size() < kSteps / 2, qPrintable(QString::number(all.size())));
        QCOMPARE(all.front().first, 1.0);
        const auto spike = points_of(g, kAmaxSpike, kAmaxSpike);
        QCOMPARE(spike.size(), std::size_t(1));
        QCOMPARE(spike[0].second, compute_of(0, kAmaxSpike));
        QCOMPARE(points_of(g, kSteps - 1999, kSteps).size(), std::size_t(2000));
        // A zoom reads every rank's records there whole and stays.
        QCPAxis* x = health->computeRect()->axis(QCPAxis::atBottom);
        QSignalSpy shown(health, &StoreView::stepsShown);
        x->setRange(6000, 6999);
        QVERIFY(shown.wait(2000));
        QVERIFY(loader.wait(30000));
        set->refreshNow();
        g = health->plot()->graph(0);
        const auto zoomed = points_of(g, 6000, 6999);
        QCOMPARE(zoomed.size(), std::size_t(1000));
        for (std::size_t i = 0; i < zoomed.size(); ++i) QCOMPARE(zoomed[i].second, compute_of(0, 6000 + std::int64_t(i)));
        QCOMPARE(x->range().lower, 6000.0);
        QCOMPARE(health->commRect()->axis(QCPAxis::atBottom)->range().upper, 6999.0);
        QVERIFY2(health->verdict().contains("(of steps 6000-6999, 28001-30000 read whole"), qPrintable(health->verdict()));
        for (StoreView* v : set->views()) v->hide();
    }

    void kernelsViewSaysWhatItCovers() {
        auto w = openViews();
        auto& [store, cursor, selection, loader, set] = *w;
        selection.setRun(0);
        auto* kernels = testing::show_view<KernelView>(*set, "kernels", QSize(1000, 800));
        connect(kernels, &StoreView::stepsShown, &loader, &TraceFileLoader::showSteps);
        // The step costs: every step of the newest 2,000, the others decimated from step 1 on,
        // the spike kept with its time.
        const std::vector<StepBreakdown>& costs = kernels->stepCosts()->steps();
        QVERIFY2(costs.size() < kSteps / 2, qPrintable(QString::number(costs.size())));
        QCOMPARE(costs.front().step, std::int64_t(1));
        const auto at = [&](std::int64_t step) {
            return std::find_if(costs.begin(), costs.end(), [&](const StepBreakdown& b) { return b.step == step; });
        };
        QVERIFY(at(kAmaxSpike) != costs.end());
        double spike_ns = 0;
        for (double ns : at(kAmaxSpike)->ns) spike_ns += ns;
        QCOMPARE(spike_ns, double(kernel_ns_of(0, kAmaxSpike) + cast_sum_of(0, kAmaxSpike).total_ns));
        for (std::int64_t s = kSteps - 1999; s <= kSteps; s += 97) QVERIFY(at(s) != costs.end());
        // The statistics over the run cover the steps read whole, and the view says so.
        kernels->setScope(KernelStatsModel::WholeRun);
        set->refreshNow();
        QVERIFY2(kernels->detailNote().contains("statistics from the 2000 steps read whole (28001-30000"),
                 qPrintable(kernels->detailNote()));
        const auto calls = [&] {
            const auto& m = kernels->model();
            for (int r = 0; r < m.rowCount(); ++r)
                if (m.data(m.index(r, KernelStatsModel::Name), Qt::DisplayRole).toString().contains("gemm"))
                    return m.data(m.index(r, KernelStatsModel::Calls), Qt::DisplayRole).toLongLong();
            return -1LL;
        };
        QCOMPARE(calls(), 2LL * 2000);
        // A zoom of the step costs reads their sums whole, and the statistics take them in.
        QCPAxis* x = kernels->stepCosts()->plot()->xAxis;
        QSignalSpy shown(kernels, &StoreView::stepsShown);
        x->setRange(3000, 3999);
        QVERIFY(shown.wait(2000));
        QVERIFY(loader.wait(30000));
        set->refreshNow();
        QVERIFY2(kernels->detailNote().contains("statistics from the 3000 steps read whole (3000-3999, 28001-30000"),
                 qPrintable(kernels->detailNote()));
        QCOMPARE(calls(), 2LL * 3000);
        QCOMPARE(x->range().lower, 3000.0);
        for (StoreView* v : set->views()) v->hide();
    }

    // The Layers view at a cursor step in the decimated steps reads that step's amax and
    // scale, and shows the figures written for it (never an earlier step's or a capture's).
    void layersViewReadsTheCursorsScaling() {
        auto w = openViews();
        auto& [store, cursor, selection, loader, set] = *w;
        selection.setRun(1);
        auto* layers = testing::show_view<LayersView>(*set, "layers", QSize(1200, 500));
        connect(layers, &StoreView::scalingWanted, &loader, &TraceFileLoader::showScalingAt);
        const LayersModel& m = layers->model();
        const auto figure = [&](int row, int column) { return m.data(m.index(row, column), kValueRole).toDouble(); };
        for (std::int64_t step : {4321, 9876}) {
            QSignalSpy wanted(layers, &StoreView::scalingWanted);
            cursor.setStep(step);
            set->refreshNow();
            QCOMPARE(wanted.size(), 1);
            QCOMPARE(wanted.at(0).at(0).toLongLong(), step);
            QVERIFY2(layers->scalingNote().startsWith(QString("step %1: reading its amax and scale from the trace").arg(step)),
                     qPrintable(layers->scalingNote()));
            QCOMPARE(m.rowCount(), kSlots);
            // While it is read: blank, or the step's own point where the decimation kept one.
            for (int r = 0; r < m.rowCount(); ++r)
                QVERIFY(std::isnan(figure(r, LayersModel::Amax)) ||
                        figure(r, LayersModel::Amax) == double(amax_of(1, step, m.operandAt(r).slot())));
            QVERIFY(loader.wait(30000));
            set->refreshNow();
            QVERIFY2(layers->scalingNote().isEmpty(), qPrintable(layers->scalingNote()));
            for (int r = 0; r < m.rowCount(); ++r) {
                const int slot = m.operandAt(r).slot();
                QCOMPARE(figure(r, LayersModel::Amax), double(amax_of(1, step, slot)));
                QCOMPARE(figure(r, LayersModel::Scale), double(448.0f / amax_of(1, step, slot)));
            }
            QCOMPARE(wanted.size(), 1);  // asked once
        }
        // The step read before went back to decimated: of the steps before the newest, the
        // store holds the cursor's row alone.
        const auto early_rows = store.read([](const TraceData& d) {
            std::vector<double> out;
            for (double s : d.runs[1].scaling.step)
                if (s < static_cast<double>(d.detail_from)) out.push_back(s);
            return out;
        });
        QCOMPARE(early_rows, std::vector<double>{9876.0});
        // A zoom over the cursor's step and back out leaves its figures read whole.
        QVERIFY(loader.showSteps(9000, 9999));
        QVERIFY(loader.showSteps(0, kSteps + TraceFileLoader::kDetailSteps));
        QVERIFY(loader.wait(30000));
        set->refreshNow();
        QVERIFY2(layers->scalingNote().isEmpty(), qPrintable(layers->scalingNote()));
        for (int r = 0; r < m.rowCount(); ++r)
            QCOMPARE(figure(r, LayersModel::Amax), double(amax_of(1, 9876, m.operandAt(r).slot())));
        for (StoreView* v : set->views()) v->hide();
    }

    // The Kernels view's table at a cursor step in the decimated steps: a step whose kernel
    // sums the decimation left out has them read, once, and shows the sums written for it;
    // a step it kept shows its own sums straight away.
    void kernelsViewReadsTheCursorsKernelSums() {
        auto w = openViews();
        auto& [store, cursor, selection, loader, set] = *w;
        selection.setRun(1);
        auto* kernels = testing::show_view<KernelView>(*set, "kernels", QSize(1000, 800));
        connect(kernels, &StoreView::kernelSumsWanted, &loader, &TraceFileLoader::showKernelSumsAt);
        connect(kernels, &StoreView::kernelRecordsWanted, &loader, &TraceFileLoader::showKernelRecords);
        const std::int64_t detail_from = store.read([](const TraceData& d) { return d.detail_from; });
        QCOMPARE(detail_from, kSteps - 1999);
        const std::vector<std::int64_t> kept = store.read([](const TraceData& d) {
            std::vector<std::int64_t> steps;  // kept by either run's decimation
            for (const RunData& rd : d.runs)
                for (const auto& k : rd.kernel_steps_decimated) steps.push_back(k.step);
            std::sort(steps.begin(), steps.end());
            return steps;
        });
        const auto was_kept = [&](std::int64_t s) { return std::binary_search(kept.begin(), kept.end(), s); };
        std::vector<std::int64_t> left_out;  // by every run's decimation
        for (std::int64_t s = 4000; left_out.size() < 2; ++s)
            if (!was_kept(s)) left_out.push_back(s);
        // The table's rows, by full kernel name: calls, total ms, max us.
        using Row = std::tuple<qlonglong, double, double>;
        const auto rows = [&] {
            std::map<QString, Row> out;
            const KernelStatsModel& m = kernels->model();
            for (int r = 0; r < m.rowCount(); ++r)
                out[m.data(m.index(r, KernelStatsModel::FullName), Qt::DisplayRole).toString()] = {
                    qlonglong(m.value(r, KernelStatsModel::Calls)), m.value(r, KernelStatsModel::TotalMs),
                    m.value(r, KernelStatsModel::MaxUs)};
            return out;
        };
        // What the trace holds for the run at `step`, from the values written.
        const auto written = [](std::int64_t step) {
            const trace::KernelStepRecord cast = cast_sum_of(1, step);
            return std::map<QString, Row>{
                {"sm90_gemm_kernel", {2, double(kernel_ns_of(1, step)) * 1e-6, 900 * 1e-3}},
                {"cast_transpose_kernel", {cast.count, double(cast.total_ns) * 1e-6, double(cast.max_ns) * 1e-3}}};
        };
        const auto text = [](const std::map<QString, Row>& m) {
            QString out;
            for (const auto& [name, r] : m)
                out += QString("%1: %2 calls, %3 ms, max %4 us; ")
                           .arg(name)
                           .arg(std::get<0>(r))
                           .arg(std::get<1>(r), 0, 'g', 17)
                           .arg(std::get<2>(r), 0, 'g', 17);
            return out;
        };
        // Empty when the table shows what the trace holds at `step`, else both.
        const auto differs = [&](std::int64_t step) {
            const auto got = rows(), want = written(step);
            return got == want ? QString() : QString("step %1: table %2; trace %3").arg(step).arg(text(got), text(want));
        };
        const auto sums_held = [&](std::int64_t step) {
            return store.read([&](const TraceData& d) { return int(d.runs[1].step_sums(step).size()); });
        };
        QSignalSpy wanted(kernels, &StoreView::kernelSumsWanted);
        for (std::int64_t step : {left_out[0], left_out[1], left_out[0]}) {
            wanted.clear();
            cursor.setStep(step);
            set->refreshNow();
            QCOMPARE(wanted.size(), 1);
            QCOMPARE(wanted.at(0).at(0).toLongLong(), step);
            QCOMPARE(kernels->tableNote(),
                     QString("step %1: reading its kernel sums from the trace (a large trace holds them decimated before "
                             "step %2)...").arg(step).arg(detail_from));
            QCOMPARE(kernels->model().rowCount(), 0);
            QVERIFY(loader.wait(30000));
            set->refreshNow();
            QVERIFY2(kernels->tableNote().isEmpty(), qPrintable(kernels->tableNote()));
            QVERIFY2(differs(step).isEmpty(), qPrintable(differs(step)));  // read again, never twice over
            QCOMPARE(kernels->model().summedSteps(), 1);
            QCOMPARE(sums_held(step), 2);
            QCOMPARE(wanted.size(), 1);  // asked once
        }
        // The step read before went back to decimated.
        QCOMPARE(sums_held(left_out[1]), 0);
        // A zoom over the cursor's step and back out leaves its sums read whole, once.
        QVERIFY(loader.showSteps(left_out[0] - 100, left_out[0] + 100));
        QVERIFY(loader.showSteps(0, kSteps + TraceFileLoader::kDetailSteps));
        QVERIFY(loader.wait(30000));
        set->refreshNow();
        QCOMPARE(sums_held(left_out[0]), 2);
        QVERIFY2(differs(left_out[0]).isEmpty(), qPrintable(differs(left_out[0])));
        // A step the decimation kept (every run keeps its first) shows its sums without a read.
        wanted.clear();
        QCOMPARE(sums_held(1), 2);
        cursor.setStep(1);
        set->refreshNow();
        QCOMPARE(wanted.size(), 0);
        QVERIFY2(kernels->tableNote().isEmpty(), qPrintable(kernels->tableNote()));
        QVERIFY2(differs(1).isEmpty(), qPrintable(differs(1)));
        QVERIFY(loader.wait(30000));
        set->refreshNow();
        QVERIFY2(differs(1).isEmpty(), qPrintable(differs(1)));
        // A step of the newest, read whole, as before.
        cursor.setStep(kSteps - 5);
        set->refreshNow();
        QCOMPARE(wanted.size(), 0);
        QVERIFY2(differs(kSteps - 5).isEmpty(), qPrintable(differs(kSteps - 5)));
        for (StoreView* v : set->views()) v->hide();
    }

    // A trace opened whole never asks, and shows every step's sums.
    void kernelsViewOfAWholeTraceReadsNothing() {
        SeriesStore store;
        StepCursor cursor;
        Selection selection;
        TraceFileLoader loader(&store);
        loader.open(path_);
        QVERIFY(loader.wait(30000));
        QCoreApplication::processEvents();
        ViewSet set(&store, &cursor, &selection);
        selection.setRun(1);
        auto* kernels = testing::show_view<KernelView>(set, "kernels", QSize(1000, 800));
        QSignalSpy wanted(kernels, &StoreView::kernelSumsWanted);
        cursor.setStep(4321);
        set.refreshNow();
        QCOMPARE(wanted.size(), 0);
        QVERIFY(kernels->tableNote().isEmpty());
        QVERIFY(!loader.showKernelSumsAt(4321));
        const KernelStatsModel& m = kernels->model();
        QCOMPARE(m.rowCount(), 2);
        for (int r = 0; r < m.rowCount(); ++r) {
            const bool gemm = m.data(m.index(r, KernelStatsModel::FullName), Qt::DisplayRole).toString() == "sm90_gemm_kernel";
            QCOMPARE(m.value(r, KernelStatsModel::Calls), gemm ? 2.0 : double(cast_sum_of(1, 4321).count));
            QCOMPARE(m.value(r, KernelStatsModel::TotalMs),
                     double(gemm ? kernel_ns_of(1, 4321) : cast_sum_of(1, 4321).total_ns) * 1e-6);
        }
        for (StoreView* v : set.views()) v->hide();
    }
};

QTEST_MAIN(LargeTraceTest)
#include "test_large_trace.moc"
