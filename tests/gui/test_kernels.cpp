// The Kernels view on a trace with kernel timing (issue 14): host ops on a CPU thread and
// kernels on two CUDA streams, every figure chosen by hand. Checks the lanes, the kind of
// each kernel, the kind and layer filters, the table's calls, total, mean and share, and
// that selecting a table row highlights its kernels in the timeline.
// With FP8SCOPE_SCREENSHOT_DIR set, the view is saved as gpu_kernels.png for a look.
#include <QApplication>
#include <QMouseEvent>
#include <QTest>
#include <QWheelEvent>

#include "models/kernel_kind.h"
#include "models/kernel_stats_model.h"
#include "show_view.h"
#include "widgets/kernel_view.h"
#include "widgets/step_cost_plot.h"
#include "widgets/timeline_widget.h"

using namespace fp8scope;
using namespace fp8scope::views;
namespace t = fp8scope::testing;

namespace {

// Host op ids of the default list, then kernel names that arrive as OpNameRecords.
enum : int { Fprop, Dgrad, Wgrad, Quantize, Capture, Attention, Optimizer, SmoothSwiglu, Head,
             Nvjet, QuantizeKernel, Histogram, Softmax, AmaxReduce, UnknownGemm, NcclAllReduce, OpCount };

trace::OpRecord host(std::int64_t step, int op, int layer, std::int64_t start, std::int64_t end) {
    trace::OpRecord r;
    r.step = step;
    r.op = op;
    r.layer = layer;
    r.start_ns = step * 1'000'000 + start;
    r.end_ns = step * 1'000'000 + end;
    return r;
}

trace::OpRecord kernel(std::int64_t step, int op, int parent, int layer, int stream, std::int64_t start, std::int64_t end) {
    trace::OpRecord r = host(step, op, layer, start, end);
    r.device = 0;
    r.stream = stream;
    r.kind = trace::OpKind::Kernel;
    r.parent = parent;
    return r;
}

// Per step, device time 3000 + 2000 + 500 + 2000 + 0 + 500 + 1000 = 9000 ns.
void add_step(TraceBatch& b, std::int64_t step) {
    b.steps.push_back({0, step, 5.0, NAN, 1e-3, 1.0, 0.1, 1e4, 0});
    b.ops.push_back(host(step, Fprop, 0, 0, 10000));
    b.ops.push_back(kernel(step, Nvjet, Fprop, 0, 7, 1000, 4000));
    b.ops.push_back(kernel(step, Nvjet, Fprop, 1, 7, 4000, 6000));
    b.ops.push_back(kernel(step, Softmax, Attention, 0, 13, 5000, 5000));  // zero length
    b.ops.push_back(host(step, Quantize, 0, 10000, 12000));
    b.ops.push_back(kernel(step, QuantizeKernel, Quantize, 0, 7, 10500, 11000));
    b.ops.push_back(host(step, Capture, 1, 12000, 20000));
    b.ops.push_back(kernel(step, Histogram, Capture, 1, 13, 13000, 15000));
    b.ops.push_back(kernel(step, AmaxReduce, Attention, 1, 13, 16000, 16500));
    b.ops.push_back(kernel(step, UnknownGemm, 99, -1, 13, 17000, 18000));  // parent id unknown
}

trace::TraceMeta gpu_meta() {
    trace::TraceMeta m;
    m.tool_version = "test";
    m.runs = {{"gpu", "current"}};
    m.linears = {{"blocks.0.mlp.fc1", 0, 64, 128}, {"blocks.1.mlp.fc1", 1, 64, 128}};
    m.quantizers = {"current_e4m3"};
    m.training_recipes = {"current"};
    m.ops = {"fprop", "dgrad", "wgrad", "quantize", "capture", "attention", "optimizer", "smooth_swiglu", "head"};
    return m;
}

TraceBatch gpu_batch() {
    TraceBatch b;
    const char* kernels[] = {"nvjet_sm90_tst_128x256", "quantize_fp8_kernel", "histogram_kernel",
                             "softmax_kernel", "amax_reduce_kernel", "some_gemm_kernel",
                             "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"};
    for (int id = Nvjet; id < OpCount; ++id) b.op_names.push_back({id, kernels[id - Nvjet]});
    add_step(b, 0);
    add_step(b, 1);
    // Step 2 ran with kernel timing off: host ops only.
    b.steps.push_back({0, 2, 5.0, NAN, 1e-3, 1.0, 0.1, 1e4, 0});
    b.ops.push_back(host(2, Fprop, 0, 0, 10000));
    return b;
}

}  // namespace

class KernelsTest : public QObject {
    Q_OBJECT
    SeriesStore store_;
    StepCursor cursor_;
    Selection selection_;
    std::unique_ptr<ViewSet> set_;

    int row_of(const KernelStatsModel& m, const QString& name) {
        for (int r = 0; r < m.rowCount(); ++r)
            if (m.data(m.index(r, KernelStatsModel::Name), Qt::DisplayRole).toString() == name) return r;
        return -1;
    }
    QString cell(const KernelStatsModel& m, int row, int column) {
        return m.data(m.index(row, column), Qt::DisplayRole).toString();
    }

private slots:
    void init() {
        QVERIFY(store_.append(store_.reset(gpu_meta()), gpu_batch()));
        set_ = std::make_unique<ViewSet>(&store_, &cursor_, &selection_);
        selection_.setRun(0);
        set_->refreshNow();
        cursor_.setStep(1);
    }
    void cleanup() { t::close_view_set(set_); }

    void kinds() {
        const trace::TraceMeta m = store_.read([](const TraceData& d) { return d.meta; });
        QCOMPARE(int(m.ops.size()), int(OpCount));  // the kernel names were appended
        auto kind = [&](int op, int parent) { return kernel_kind(m, kernel(0, op, parent, 0, 7, 0, 1)); };
        QCOMPARE(kernel_kind(m, host(0, Fprop, 0, 0, 1)), KernelKind::Host);
        // By the kernel's name, whatever op it ran in.
        QCOMPARE(kind(Nvjet, Fprop), KernelKind::Gemm);
        QCOMPARE(kind(Softmax, Head), KernelKind::Other);         // not a GEMM for running in the head op
        QCOMPARE(kind(UnknownGemm, -1), KernelKind::Gemm);
        QCOMPARE(kind(UnknownGemm, 99), KernelKind::Gemm);        // unknown parent id
        QCOMPARE(kind(QuantizeKernel, Attention), KernelKind::Quantize);
        QCOMPARE(kind(Softmax, SmoothSwiglu), KernelKind::Other);
        QCOMPARE(kind(Nvjet, Capture), KernelKind::Gemm);         // capture's cost is its category (kernel_breakdown.h)
        QCOMPARE(kind(Histogram, Fprop), KernelKind::Capture);
        QCOMPARE(kind(AmaxReduce, Attention), KernelKind::Quantize);
        QCOMPARE(kind(NcclAllReduce, -1), KernelKind::Communication);
        QCOMPARE(kernel_kind_name(KernelKind::Communication), QString("communication"));
        QCOMPARE(kind(1000, 1000), KernelKind::Other);            // ids out of range
        QCOMPARE(kernel_kind_name(KernelKind::Gemm), QString("GEMM"));
        KernelSelection gemm{KernelFilter::Gemm, -1}, layer1{KernelFilter::All, 1};
        QVERIFY(gemm.passes(m, kernel(0, Nvjet, Fprop, 0, 7, 0, 1)));
        QVERIFY(!gemm.passes(m, kernel(0, Histogram, Capture, 0, 7, 0, 1)));
        QVERIFY(gemm.passes(m, host(0, Capture, 0, 0, 1)));  // host ops stay as context
        QVERIFY(!layer1.passes(m, host(0, Capture, 0, 0, 1)));
    }

    void tableOfStep() {
        KernelStatsModel m(&store_);
        m.refresh(0, 1);
        QVERIFY(m.device());
        QCOMPARE(m.rowCount(), 6);  // device kernels only, per name
        QCOMPARE(m.stepSeconds(), 9000e-9);
        QCOMPARE(m.steps(), 1);
        const int nvjet = row_of(m, "nvjet_sm90_tst_128x256");
        QCOMPARE(nvjet, 0);  // the largest total first
        QCOMPARE(m.value(nvjet, KernelStatsModel::Calls), 2.0);
        QCOMPARE(m.value(nvjet, KernelStatsModel::TotalMs), 5000e-6);
        QCOMPARE(m.value(nvjet, KernelStatsModel::MeanUs), 2.5);
        QCOMPARE(m.value(nvjet, KernelStatsModel::SharePct), 100.0 * 5000 / 9000);
        QCOMPARE(cell(m, nvjet, KernelStatsModel::ParentOp), QString("fprop"));
        QCOMPARE(cell(m, nvjet, KernelStatsModel::Kind), QString("GEMM"));
        const int hist = row_of(m, "histogram_kernel");
        QCOMPARE(m.value(hist, KernelStatsModel::SharePct), 100.0 * 2000 / 9000);
        QCOMPARE(cell(m, hist, KernelStatsModel::Kind), QString("capture"));
        const int soft = row_of(m, "softmax_kernel");
        QCOMPARE(m.value(soft, KernelStatsModel::TotalMs), 0.0);
        QCOMPARE(m.value(soft, KernelStatsModel::MeanUs), 0.0);
        QCOMPARE(cell(m, row_of(m, "some_gemm_kernel"), KernelStatsModel::ParentOp), QString("op #99"));
        QCOMPARE(m.headerData(KernelStatsModel::SharePct, Qt::Horizontal, Qt::DisplayRole).toString(),
                 QString("share of device time %"));
    }

    void tableOfRunAndFilters() {
        KernelStatsModel m(&store_);
        m.refresh(0, 1, KernelStatsModel::WholeRun);
        QCOMPARE(m.steps(), 3);
        QCOMPARE(m.stepSeconds(), 18000e-9);
        const int nvjet = row_of(m, "nvjet_sm90_tst_128x256");
        QCOMPARE(m.value(nvjet, KernelStatsModel::Calls), 4.0);
        QCOMPARE(m.value(nvjet, KernelStatsModel::TotalMs), 10000e-6);
        QCOMPARE(m.value(nvjet, KernelStatsModel::SharePct), 100.0 * 10000 / 18000);
        m.refresh(0, 1, KernelStatsModel::CursorStep, {KernelFilter::Gemm, -1});
        QCOMPARE(m.rowCount(), 2);  // nvjet and the GEMM named so
        QCOMPARE(m.value(row_of(m, "nvjet_sm90_tst_128x256"), KernelStatsModel::SharePct), 100.0 * 5000 / 9000);
        m.refresh(0, 1, KernelStatsModel::CursorStep, {KernelFilter::All, 1});
        QCOMPARE(m.rowCount(), 3);  // nvjet (layer 1's call), histogram, amax
        QCOMPARE(m.value(row_of(m, "nvjet_sm90_tst_128x256"), KernelStatsModel::Calls), 1.0);
        m.refresh(0, 1, KernelStatsModel::CursorStep, {KernelFilter::Capture, 0});
        QCOMPARE(m.rowCount(), 0);
        // Without device records the host ops are the rows, as before kernel timing.
        m.refresh(0, 2);
        QVERIFY(!m.device());
        QCOMPARE(m.rowCount(), 1);
        QCOMPARE(cell(m, 0, KernelStatsModel::Name), QString("fprop"));
        m.refresh(5, 1);  // no such run
        QCOMPARE(m.rowCount(), 0);
    }

    void view() {
        auto* v = t::show_view<KernelView>(*set_, "kernels", {1000, 640}, "gpu_");
        TimelineWidget* tl = v->timeline();
        QCOMPARE(tl->lanes(), QStringList({"CPU thread 0", "GPU 0 stream 7", "GPU 0 stream 13"}));
        QCOMPARE(int(tl->boxes().size()), 10);
        QCOMPARE(v->model().rowCount(), 6);
        int gpu_boxes = 0;
        for (const auto& b : tl->boxes()) gpu_boxes += b.lane > 0;
        QCOMPARE(gpu_boxes, 7);
        // Zoom from the step to one kernel (the zero-length one too) and back.
        for (const auto& b : tl->boxes()) {
            tl->zoomTo(b);
            QVERIFY(tl->viewStart() <= b.start_us && tl->viewEnd() >= b.end_us);
            QVERIFY(tl->viewEnd() - tl->viewStart() <= std::max(1.21 * (b.end_us - b.start_us), 0.003));
        }
        tl->resetView();
        QCOMPARE(tl->viewEnd(), 20.0);
        // With the mouse: twelve wheel notches at the first nvjet kernel (1 to 4 us) zoom
        // the view inside it; a drag to the right pans to earlier times at the same zoom.
        const QPointF at(tl->xOf(2.5), 80);
        for (int i = 0; i < 12; ++i) {
            QWheelEvent wheel(at, tl->mapToGlobal(at), {}, {0, 120}, Qt::NoButton, Qt::NoModifier, Qt::NoScrollPhase, false);
            QApplication::sendEvent(tl, &wheel);
        }
        QVERIFY(tl->viewStart() >= 1.0 && tl->viewEnd() <= 4.0);
        const double start = tl->viewStart(), span = tl->viewEnd() - tl->viewStart();
        QMouseEvent press(QEvent::MouseButtonPress, at, tl->mapToGlobal(at), Qt::LeftButton, Qt::LeftButton, Qt::NoModifier);
        QApplication::sendEvent(tl, &press);
        const QPointF to = at + QPointF(50, 0);
        QMouseEvent move(QEvent::MouseMove, to, tl->mapToGlobal(to), Qt::NoButton, Qt::LeftButton, Qt::NoModifier);
        QApplication::sendEvent(tl, &move);
        QVERIFY(tl->viewStart() < start);
        QCOMPARE(tl->viewEnd() - tl->viewStart(), span);
        tl->resetView();
        v->setKindFilter(KernelFilter::Gemm);
        set_->refreshNow();
        QCOMPARE(int(tl->boxes().size()), 3 + 3);  // host ops and the three GEMMs
        QCOMPARE(tl->lanes().size(), 3);           // lanes stay
        QCOMPARE(v->model().rowCount(), 2);
        v->setKindFilter(KernelFilter::All);
        v->setLayerFilter(1);
        set_->refreshNow();
        QCOMPARE(int(tl->boxes().size()), 4);  // capture op, nvjet, histogram, amax of layer 1
        QCOMPARE(v->model().rowCount(), 3);
        v->setLayerFilter(-1);
        set_->refreshNow();
        // Selecting the nvjet row outlines its two calls (stream 7) and nothing else.
        v->selectRow(row_of(v->model(), "nvjet_sm90_tst_128x256"));
        QVERIFY(tl->highlighting());
        int lit = 0;
        for (const auto& b : tl->boxes()) {
            lit += b.highlighted;
            if (b.highlighted) QVERIFY(b.name.startsWith("nvjet_sm90_tst_128x256") && b.lane == 1);
        }
        QCOMPARE(lit, 2);
        v->setGrouping(KernelStatsModel::ByCategory);
        set_->refreshNow();
        v->selectRow(row_of(v->model(), "capture"));  // the histogram kernel, in the capture op
        lit = 0;
        for (const auto& b : tl->boxes()) lit += b.highlighted;
        QCOMPARE(lit, 1);
        v->selectRow(-1);
        QVERIFY(!tl->highlighting());
        v->setGrouping(KernelStatsModel::ByKernel);
        // The step bar: two steps of 9000 ns of records each.
        QCOMPARE(int(v->stepCosts()->steps().size()), 2);
        if (const QByteArray dir = qgetenv("FP8SCOPE_SCREENSHOT_DIR"); !dir.isEmpty()) {
            set_->refreshNow();
            tl->zoomTo(tl->boxes()[1]);  // the first nvjet kernel, label inside its box
            v->grab().save(QString("%1/gpu_kernels_zoomed.png").arg(QString(dir)));
        }
        // A new trace with other layers refills the layer combo; the choice falls back to all.
        v->setLayerFilter(1);
        trace::TraceMeta other = gpu_meta();
        other.linears = {{"blocks.4.mlp.fc1", 4, 64, 128}, {"blocks.5.mlp.fc1", 5, 64, 128}};
        QVERIFY(store_.append(store_.reset(other), gpu_batch()));
        set_->refreshNow();
        QCOMPARE(int(tl->boxes().size()), 10);
        v->setLayerFilter(5);
        set_->refreshNow();
        QCOMPARE(int(tl->boxes().size()), 0);  // the records name layers 0 and 1
        v->setLayerFilter(-1);
        set_->refreshNow();
        // The step without device records, and a cursor past the data.
        cursor_.setStep(2);
        set_->refreshNow();
        QCOMPARE(int(tl->boxes().size()), 1);
        cursor_.setStep(50);
        set_->refreshNow();
    }
};

int main(int argc, char** argv) {
    QApplication app(argc, argv);
    KernelsTest test;
    return QTest::qExec(&test, argc, argv);
}

#include "test_kernels.moc"
