// The Kernels view on a GPU trace that kept its individual kernel records on some steps
// only (--kernel-timings capture): read from a trace file, its statistics and step costs
// cover every step from the per-step kernel sums, a line says where the records are, and
// a step without them says so in the timeline. The same run with every record, in the
// format before the sums (5), shows the same calls and totals. Figures by hand:
//   step s (1..10): nvjet_gemm twice in fprop, 3000 + 10 s ns each; cast_fp8 once in
//   quantize, 500 ns; records kept on steps 1 and 6.
//   nvjet_gemm over the run: 20 calls, 2 * (10 * 3000 + 10 * 55) = 61100 ns;
//   cast_fp8: 10 calls, 5000 ns; every step's device time 6500 + 20 s.
#include <QApplication>
#include <QLabel>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>
#include <hdf5.h>
#include <map>
#include <tuple>

#include "models/kernel_detail.h"
#include "models/kernel_stats_model.h"
#include "models/open_trace.h"
#include "models/trace_file_loader.h"
#include "show_view.h"
#include "trace_writer.h"
#include "widgets/kernel_view.h"
#include "widgets/step_cost_plot.h"
#include "widgets/timeline_widget.h"

using namespace fp8scope;
using namespace fp8scope::views;
namespace t = fp8scope::testing;

namespace {

enum : int { Fprop, Quantize, Nvjet, Cast };
constexpr int kSteps = 10;

trace::TraceMeta meta() {
    trace::TraceMeta m;
    m.tool_version = "test";
    m.runs = {{"gpu", "current"}};
    m.linears = {{"blocks.0.mlp.fc1", 0, 64, 128}};
    m.quantizers = {"current_e4m3"};
    m.training_recipes = {"current"};
    m.ops = {"fprop", "quantize", "nvjet_gemm", "cast_fp8"};
    m.kernel_timings = "capture";
    m.kernel_window = 2;
    return m;
}

trace::OpRecord record(std::int64_t step, int op, int parent, std::int64_t start, std::int64_t len) {
    trace::OpRecord r;
    r.step = step;
    r.op = op;
    r.parent = parent;
    r.start_ns = step * 1'000'000 + start;
    r.end_ns = r.start_ns + len;
    r.layer = 0;
    r.device = parent >= 0 ? 0 : -1;
    r.kind = parent >= 0 ? trace::OpKind::Kernel : trace::OpKind::Host;
    return r;
}

// `kept`: the steps whose device records are written; `sums`: the per-step sums too.
void write(const std::string& path, const std::vector<std::int64_t>& kept, bool sums, std::int64_t steps = kSteps) {
    trace::TraceWriter w(path, meta());
    for (std::int64_t s = 1; s <= steps; ++s) {
        const std::int64_t gemm = 3000 + 10 * s;
        w.write(record(s, Fprop, -1, 0, 10000));
        if (std::find(kept.begin(), kept.end(), s) != kept.end()) {
            w.write(record(s, Nvjet, Fprop, 100, gemm));
            w.write(record(s, Nvjet, Fprop, 4000, gemm));
            w.write(record(s, Cast, Quantize, 8000, 500));
        }
        const int detailed = std::find(kept.begin(), kept.end(), s) != kept.end();
        if (sums) {
            w.write(trace::KernelStepRecord{0, s, Nvjet, Fprop, trace::OpKind::Kernel, detailed, 2, 2 * gemm, gemm, gemm, 0});
            w.write(trace::KernelStepRecord{0, s, Cast, Quantize, trace::OpKind::Kernel, detailed, 1, 500, 500, 500, 0});
        }
        w.write(trace::StepRecord{0, s, 5.0, NAN, 1e-3, 1.0, 10.0, 1e4, 0});
    }
    w.close();
}

void to_format5(const std::string& path) {
    hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    QVERIFY(f >= 0);
    QVERIFY(H5Ldelete(f, "/kernel_steps", H5P_DEFAULT) >= 0);
    hid_t a = H5Aopen(f, "format_version", H5P_DEFAULT);
    const std::int64_t v = 5;
    QVERIFY(H5Awrite(a, H5T_NATIVE_INT64, &v) >= 0);
    H5Aclose(a);
    H5Adelete(f, "kernel_timings");
    H5Adelete(f, "kernel_window");
    H5Fclose(f);
}

void load(SeriesStore& store, const std::string& path) {
    OpenTrace file(path);
    const auto generation = store.reset(file.meta());
    file.readNew([&](TraceBatch&& b) { store.append(generation, std::move(b)); });
}

// A timeline box as a comparable tuple.
using Box = std::tuple<QString, int, double, double, QString>;
std::vector<Box> boxes_of(const KernelView* v) {
    std::vector<Box> out;
    for (const TimelineBox& b : v->timeline()->boxes()) out.emplace_back(b.name, b.lane, b.start_us, b.end_us, b.detail);
    return out;
}

// The op and kernel records the store holds of run 0 at `step`.
std::size_t ops_at(const SeriesStore& store, std::int64_t step) {
    return store.read([&](const TraceData& d) {
        const auto [lo, hi] = d.runs[0].ops_of_step(step);
        return hi - lo;
    });
}

}  // namespace

class KernelWindowTest : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;
    SeriesStore store_;
    StepCursor cursor_;
    Selection selection_;
    std::unique_ptr<ViewSet> set_;

    static int row_of(const KernelStatsModel& m, const QString& name) {
        const QModelIndexList found = m.match(m.index(0, KernelStatsModel::Name), Qt::DisplayRole, name, 1, Qt::MatchExactly);
        return found.isEmpty() ? -1 : found.first().row();
    }
    KernelView* open(const std::string& path) {
        load(store_, path);
        set_ = std::make_unique<ViewSet>(&store_, &cursor_, &selection_);
        selection_.setRun(0);
        auto* v = t::show_view<KernelView>(*set_, "kernels", QSize(1200, 800), "window_");
        v->setScope(KernelStatsModel::WholeRun);
        cursor_.setStep(3);
        set_->refreshNow();
        return v;
    }
    // The whole-run figures every trace of this run shows: calls and totals of every step.
    void expectWholeRun(const KernelView* v) {
        const KernelStatsModel& m = v->model();
        QVERIFY(m.device());
        const int gemm = row_of(m, "nvjet_gemm"), cast = row_of(m, "cast_fp8");
        QVERIFY(gemm >= 0 && cast >= 0);
        QCOMPARE(m.value(gemm, KernelStatsModel::Calls), 20.0);
        QCOMPARE(m.value(gemm, KernelStatsModel::TotalMs), 61100e-6);
        QCOMPARE(m.value(gemm, KernelStatsModel::MaxUs), 3.1);  // step 10's call
        QCOMPARE(m.value(cast, KernelStatsModel::Calls), 10.0);
        QCOMPARE(m.value(cast, KernelStatsModel::TotalMs), 5000e-6);
        QCOMPARE(m.steps(), kSteps);
        QCOMPARE(m.stepSeconds(), 66100e-9);
        const auto& costs = v->stepCosts()->steps();
        QCOMPARE(int(costs.size()), kSteps);
        for (int s = 1; s <= kSteps; ++s) {
            double ns = 0;
            for (int c = 0; c < kStepCategories; ++c)
                if (c != int(StepCategory::Idle)) ns += costs[std::size_t(s - 1)].ns[std::size_t(c)];
            QCOMPARE(costs[std::size_t(s - 1)].step, std::int64_t(s));
            QCOMPARE(ns, 6500.0 + 20 * s);
            QCOMPARE(costs[std::size_t(s - 1)].ns[std::size_t(StepCategory::Gemm)], 6000.0 + 20 * s);
        }
    }

private slots:
    void cleanup() {
        if (set_) t::close_view_set(set_);
    }

    void statisticsCoverEveryStep() {
        const std::string path = dir_.filePath("capture.h5").toStdString();
        write(path, {1, 6}, true);
        KernelView* v = open(path);
        expectWholeRun(v);
        const KernelStatsModel& m = v->model();
        QCOMPARE(m.summedSteps(), 8);
        // The distribution is of the recorded calls (steps 1 and 6: 3010, 3010, 3060, 3060).
        QCOMPARE(m.value(row_of(m, "nvjet_gemm"), KernelStatsModel::MedianUs), 3.01);
        QCOMPARE(v->detailNote(),
                 QString("individual kernels recorded on steps 1, 6 (--kernel-timings capture, window 2); "
                         "statistics from every step (10 steps with kernel sums)"));
        const auto& costs = v->stepCosts()->steps();
        QVERIFY(!costs[0].summed);
        QVERIFY(costs[2].summed);
        QVERIFY(v->stepCosts()->describe(3).contains("individual records were not kept"));
        // Step 3 has no records: its timeline shows its host op and says where they are.
        QVERIFY(v->timeline()->note().startsWith("step 3: kernel sums only"));
        QVERIFY(v->timeline()->note().contains("kept on steps 1, 6"));
        QCOMPARE(int(v->timeline()->boxes().size()), 1);
        // The cursor step's own statistics come from its sums.
        v->setScope(KernelStatsModel::CursorStep);
        set_->refreshNow();
        QCOMPARE(m.value(row_of(m, "nvjet_gemm"), KernelStatsModel::Calls), 2.0);
        QCOMPARE(m.value(row_of(m, "nvjet_gemm"), KernelStatsModel::TotalMs), 6060e-6);
        cursor_.setStep(6);
        set_->refreshNow();
        QVERIFY(v->timeline()->note().isEmpty());
        QCOMPARE(int(v->timeline()->boxes().size()), 4);
        // A layer filter cannot apply to sums: the recorded steps alone.
        v->setScope(KernelStatsModel::WholeRun);
        v->setLayerFilter(0);
        set_->refreshNow();
        QCOMPARE(m.value(row_of(m, "nvjet_gemm"), KernelStatsModel::Calls), 4.0);
    }

    // A long capture-mode trace opened as an overview (its newest 2,000 steps whole): the
    // timeline of early steps reads their records, as opened whole it shows them.
    void anOverviewReadsEarlyRecords() {
        constexpr std::int64_t kLong = 3000;  // the newest 2,000 steps: 1001-3000
        const std::vector<std::int64_t> kept{1, 6, 500, 501, 502, 900, 2990};
        const std::string path = dir_.filePath("long.h5").toStdString();
        write(path, kept, true, kLong);
        // Opened whole: the boxes of steps 500-502, 898-900 and 298-300.
        KernelView* whole = open(path);
        whole->setTimelineSteps(3);
        std::map<std::int64_t, std::vector<Box>> want;
        for (std::int64_t step : {502, 900, 300}) {
            cursor_.setStep(step);
            set_->refreshNow();
            want[step] = boxes_of(whole);
        }
        QCOMPARE(int(want[502].size()), 3 + 3 * 3);  // a host op per step, 3 kernels per kept step
        QCOMPARE(int(want[900].size()), 3 + 3);
        QCOMPARE(int(want[300].size()), 3);
        const std::size_t ops_500 = ops_at(store_, 500);
        QCOMPARE(ops_500, std::size_t(4));
        whole->hide();

        SeriesStore store;
        StepCursor cursor;
        Selection selection;
        TraceFileLoader loader(&store);
        loader.setLargeStepRows(1000);
        loader.open(QString::fromStdString(path));
        QVERIFY(loader.wait(30000));
        QCOMPARE(store.read([](const TraceData& d) { return d.detail_from; }), std::int64_t(1001));
        auto set = std::make_unique<ViewSet>(&store, &cursor, &selection);
        selection.setRun(0);
        auto* v = t::show_view<KernelView>(*set, "kernels", QSize(1200, 800), "overview_");
        connect(v, &StoreView::kernelRecordsWanted, &loader, &TraceFileLoader::showKernelRecords);
        v->setTimelineSteps(3);
        // The note names every step the file kept records of, not only those in memory.
        QVERIFY2(v->detailNote().startsWith("individual kernels recorded on steps 1, 6, 500-502, 900, 2990 "
                                            "(--kernel-timings capture, window 2); a large trace"),
                 qPrintable(v->detailNote()));
        QSignalSpy wanted(v, &StoreView::kernelRecordsWanted);
        for (std::int64_t step : {502, 900, 300}) {
            cursor.setStep(step);
            set->refreshNow();
            QCOMPARE(wanted.size(), 1);
            QCOMPARE(wanted.takeFirst(), (QList<QVariant>{qint64(step - 2), qint64(step)}));
            QCOMPARE(v->timeline()->note(), QString("steps %1-%2: reading their op and kernel records from the trace...")
                                                .arg(step - 2)
                                                .arg(step));
            QVERIFY(loader.wait(30000));
            set->refreshNow();
            QCOMPARE(boxes_of(v), want[step]);
            QCOMPARE(wanted.size(), 0);  // asked once
        }
        QCOMPARE(ops_at(store, 500), ops_500);
        // Step 300 kept no records, only its sums (the decimation keeps every early step's of so
        // short a trace): the note says where the records are.
        QCOMPARE(v->timeline()->note(), QString("step 300: kernel sums only, no individual kernel records (kept on steps 1, "
                                                "6, 500-502, 900, and 1 more steps)"));
        // Reading a window again replaces its records, never adds them twice.
        QVERIFY(loader.showKernelRecords(500, 502));
        QVERIFY(loader.wait(30000));
        QCOMPARE(ops_at(store, 500), ops_500);
        // Past TraceData::kOpWindows windows the oldest asked for (898-900; 500-502 was
        // asked again since) goes.
        for (std::int64_t step : {6, 1000}) {
            cursor.setStep(step);
            set->refreshNow();
            QVERIFY(loader.wait(30000));
        }
        set->refreshNow();
        QCOMPARE(ops_at(store, 900), std::size_t(0));
        QCOMPARE(ops_at(store, 500), ops_500);
        QCOMPARE(ops_at(store, 300), std::size_t(1));  // its host op
        QCOMPARE(ops_at(store, 6), std::size_t(4));
        const auto windows = store.read([](const TraceData& d) { return d.op_windows; });
        QCOMPARE(int(windows.size()), int(TraceData::kOpWindows));
        QCOMPARE(windows.front(), (std::pair<std::int64_t, std::int64_t>(298, 300)));
        // Back at step 900: read again, as opened whole; now 298-300 goes.
        cursor.setStep(900);
        set->refreshNow();
        QVERIFY(loader.wait(30000));
        set->refreshNow();
        QCOMPARE(boxes_of(v), want[900]);
        QCOMPARE(ops_at(store, 300), std::size_t(0));
        for (StoreView* view : set->views()) view->hide();
    }

    // What the timeline says of an overview's early step before the file's kernel sums were
    // read through, once they were, and which of its steps are still to read.
    void anOverviewsNotesBeforeTheRecordsAreKnown() {
        SeriesStore store;
        const auto generation = store.reset(meta());
        TraceBatch head;
        head.detail_from = 1001;
        head.kernel_steps.push_back({0, 1500, Nvjet, Fprop, trace::OpKind::Kernel, 0, 2, 6000, 3000, 3000, 0});
        QVERIFY(store.append(generation, std::move(head)));
        TraceBatch sums;  // the decimated sums of the early steps
        sums.replace = TraceBatch::StepRange{INT64_MIN, 1000, {0}, TraceBatch::KernelSums};
        sums.kernel_steps_decimated.push_back({0, 7, Nvjet, Fprop, trace::OpKind::Kernel, 0, 2, 6000, 3000, 3000, 0});
        QVERIFY(store.append(generation, std::move(sums)));
        const auto note = [&](std::int64_t first, std::int64_t step) {
            return store.read([&](const TraceData& d) { return timeline_note(d, 0, first, step); });
        };
        const auto wanted = [&](std::int64_t first, std::int64_t last) {
            return store.read([&](const TraceData& d) { return kernel_records_wanted(d, first, last); });
        };
        QCOMPARE(wanted(299, 300), (std::optional(std::pair<std::int64_t, std::int64_t>(299, 300))));
        QCOMPARE(wanted(999, 1002), (std::optional(std::pair<std::int64_t, std::int64_t>(999, 1000))));
        QCOMPARE(wanted(1001, 1500), std::nullopt);  // the newest steps are whole
        QCOMPARE(note(299, 300), QString("steps 299-300: reading their op and kernel records from the trace..."));
        TraceBatch ops;  // the window read: no records in the file there
        ops.replace = TraceBatch::StepRange{299, 300, {0}, TraceBatch::Ops};
        QVERIFY(store.append(generation, std::move(ops)));
        QCOMPARE(wanted(299, 300), std::nullopt);
        QCOMPARE(wanted(300, 300), std::nullopt);
        QCOMPARE(wanted(298, 300), (std::optional(std::pair<std::int64_t, std::int64_t>(298, 300))));
        QCOMPARE(note(300, 300), QString("step 300: no individual kernel records (the steps that kept them are still being found)"));
        QCOMPARE(note(1500, 1500), QString("step 1500: kernel sums only, no individual kernel records (the steps that "
                                           "kept them are still being found)"));
        TraceBatch known;
        known.kernel_record_steps.push_back({0, {}});
        QVERIFY(store.append(generation, std::move(known)));
        QCOMPARE(note(300, 300), QString("step 300: no individual kernel records (no step of the trace kept them)"));
        QVERIFY(store.read([](const TraceData& d) { return kernel_detail_note(d, 0); })
                    .startsWith("no individual kernels recorded (--kernel-timings capture, window 2); a large trace"));
    }

    void aFormat5TraceShowsTheSame() {
        const std::string path = dir_.filePath("v5.h5").toStdString();
        std::vector<std::int64_t> every;
        for (std::int64_t s = 1; s <= kSteps; ++s) every.push_back(s);
        write(path, every, false);
        to_format5(path);
        KernelView* v = open(path);
        expectWholeRun(v);
        QCOMPARE(v->model().summedSteps(), 0);
        QVERIFY(v->detailNote().isEmpty());  // every step kept its records
        QVERIFY(v->timeline()->note().isEmpty());
    }
};

QTEST_MAIN(KernelWindowTest)
#include "test_kernel_window.moc"
