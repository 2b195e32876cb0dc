// Every view drawn offscreen from the synthetic trace: the plotted points, heatmap cells,
// bars, timeline boxes and table rows are checked against the trace's formulas, and the
// cross-view flows (layers table selects the operand, events jump the cursor) run.
// The suite runs twice: on a store filled directly, and on the same trace written to an
// HDF5 file by capture's writer and read back through the GUI's file loader.
// With FP8SCOPE_SCREENSHOT_DIR set, each view is also saved as PNG for a look.
#include <QApplication>
#include <QLineEdit>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QSortFilterProxyModel>
#include <QTableView>
#include <QTest>
#include <cmath>
#include <qcustomplot.h>

#include "amax_view.h"
#include "blockmap_view.h"
#include "error_view.h"
#include "events_view.h"
#include "kernel_view.h"
#include "layers_view.h"
#include "loss_view.h"
#include "outliers_view.h"
#include "synthetic_trace.h"
#include "timeline_widget.h"
#include "trace_file.h"
#include "trace_file_loader.h"
#include "view_set.h"

using namespace fp8scope;
using namespace fp8scope::views;
namespace t = fp8scope::testing;

class ViewsTest : public QObject {
    Q_OBJECT
public:
    explicit ViewsTest(bool from_file) : from_file_(from_file) {}

private:
    bool from_file_;
    QTemporaryDir dir_;
    t::SyntheticSpec spec_;
    SeriesStore store_;
    StepCursor cursor_;
    Selection selection_;
    std::unique_ptr<ViewSet> set_;
    std::unique_ptr<TraceFileLoader> loader_;  // when reading the trace file

    template <class V>
    V* show(const char* name) {
        auto* v = qobject_cast<V*>(set_->view(name));
        v->resize(1000, 640);
        v->show();
        set_->refreshNow();
        if (const QByteArray dir = qgetenv("FP8SCOPE_SCREENSHOT_DIR"); !dir.isEmpty())
            v->grab().save(QString("%1/%2.png").arg(QString(dir), name));
        return v;
    }
    static double at(QCPGraph* g, int i) { return (g->data()->constBegin() + i)->value; }
    static double keyAt(QCPGraph* g, int i) { return (g->data()->constBegin() + i)->key; }

private slots:
    void initTestCase() {
        if (!from_file_) return;
        QVERIFY(dir_.isValid());
        t::write_synthetic_trace(dir_.filePath("synthetic.h5"), spec_);
    }
    void init() {
        if (from_file_) {
            loader_ = std::make_unique<TraceFileLoader>(&store_);
            QSignalSpy failed(loader_.get(), &TraceFileLoader::failed);
            loader_->open(dir_.filePath("synthetic.h5"));
            QVERIFY(loader_->wait(30000));
            QCoreApplication::processEvents();
            QCOMPARE(failed.count(), 0);
        } else {
            store_.append(store_.reset(t::synthetic_meta(spec_)), t::synthetic_batch(spec_));
        }
        set_ = std::make_unique<ViewSet>(&store_, &cursor_, &selection_);
        selection_.setRun(1);
        selection_.setOperand({2, Gemm::Fprop, Operand::X});
        set_->refreshNow();
        cursor_.setStep(37);
    }
    void cleanup() {
        for (StoreView* v : set_->views()) v->hide();
        set_.reset();
        loader_.reset();
    }

    void cursorRangeFollowsStore() {
        QCOMPARE(cursor_.first(), 0);
        QCOMPARE(cursor_.last(), spec_.steps - 1);
        QCOMPARE(cursor_.step(), 37);
    }

    void lossView() {
        auto* v = show<LossView>("loss");
        QCustomPlot* p = v->lossPlot();
        QCOMPARE(p->graphCount(), 2 * spec_.runs);  // loss and eval loss per run
        QCOMPARE(p->graph(2)->dataCount(), int(spec_.steps));
        QCOMPARE(at(p->graph(2), 17), t::loss_of(1, 17));
        QCOMPARE(p->graph(3)->dataCount(), 5);  // eval every 10 steps
        QCOMPARE(at(p->graph(3), 2), t::eval_loss_of(1, 20));
        QCOMPARE(v->diffPlot()->graphCount(), spec_.runs - 1);
        QCOMPARE(at(v->diffPlot()->graph(1), 9), t::loss_of(2, 9) - t::loss_of(0, 9));
        QCOMPARE(at(v->speedPlot()->graph(0), 4), t::step_time_of(0, 4) * 1e3);
    }

    void amaxView() {
        auto* v = show<AmaxView>("amax");
        const int slot = trace::operand_slot(2, Gemm::Fprop, Operand::X);
        QCPGraph* amax = v->plot()->graph(AmaxView::AmaxGraph);
        QCOMPARE(amax->dataCount(), int(spec_.steps));
        QCOMPARE(at(amax, 23), double(t::amax_of(1, 23, slot)));
        QCOMPARE(at(v->plot()->graph(AmaxView::ScaleGraph), 23), double(t::scale_of(1, 23, slot)));
        QCPGraph* hist = v->plot()->graph(AmaxView::HistoryGraph);  // window of the capture at 30
        QCOMPARE(hist->dataCount(), 16);
        QCOMPARE(keyAt(hist, 0), 14.0);
        QCOMPARE(at(hist, 15), double(t::amax_of(1, 29, slot)));
        // Overflow: amax x scale beyond E4M3's 448 (run 1 uses block1x128: E4M3).
        int expected = 0;
        for (int s = 0; s < spec_.steps; ++s) expected += double(t::amax_of(1, s, slot)) * double(t::scale_of(1, s, slot)) > 448.0;
        QVERIFY(expected > 0);
        QCOMPARE(v->plot()->graph(AmaxView::OverflowGraph)->dataCount(), expected);
    }

    void outliersView() {
        selection_.setOperand({1, Gemm::Dgrad, Operand::DY});
        auto* v = show<OutliersView>("outliers");
        auto* map = qobject_cast<QCPColorMap*>(v->layersHeatmap()->plottable(0));
        QVERIFY(map);
        QCOMPARE(map->data()->valueSize(), spec_.linears);
        const int slot = trace::operand_slot(3, Gemm::Dgrad, Operand::DY);
        // Exponent -20 is the lowest bin, so cell x = e + 20.
        QCOMPARE(map->data()->keyRange().lower, -20.0);
        QCOMPARE(map->data()->cell(0 + 20, 3), std::log10(1.0 + (slot + 1) * 21));
        auto* kurt = qobject_cast<QCPBars*>(v->kurtosisPlot()->plottable(0));
        QCOMPARE((kurt->data()->constBegin() + 3)->value, t::kurtosis_of(slot, 30));
        auto* steps = qobject_cast<QCPColorMap*>(v->stepsHeatmap()->plottable(0));
        QCOMPARE(steps->data()->keySize(), 4);  // captures 0, 10, 20, 30 up to the cursor
        auto* red = qobject_cast<QCPBars*>(v->channelPlot()->plottable(1));
        QCOMPARE(red->dataCount(), 1);  // channel 7 holds the outlier
        QCOMPARE(red->data()->constBegin()->key, 7.0);
        QCOMPARE(red->data()->constBegin()->value, 50.0);
    }

    void errorView() {
        selection_.setOperand({0, Gemm::Wgrad, Operand::DY});
        auto* v = show<ErrorView>("error");
        QCOMPARE(v->barsPlot()->plottableCount(), 4);
        for (int r = 0; r < 4; ++r) {
            auto* b = qobject_cast<QCPBars*>(v->barsPlot()->plottable(r));
            QCOMPARE(b->dataCount(), spec_.linears);
            const int slot = trace::operand_slot(2, Gemm::Wgrad, Operand::DY);
            QCOMPARE((b->data()->constBegin() + 2)->value, t::sqnr_of(1, 30, slot, r));
        }
        QCPGraph* g = v->stepsPlot()->graph(3);
        QCOMPARE(g->dataCount(), 5);
        QCOMPARE(at(g, 4), t::sqnr_of(1, 40, trace::operand_slot(0, Gemm::Wgrad, Operand::DY), 3));
        selection_.setStat(ErrorStat::UnderflowPct);
        set_->refreshNow();
        QCOMPARE((qobject_cast<QCPBars*>(v->barsPlot()->plottable(2))->data()->constBegin())->value, 1.0);
    }

    void blockMapView() {
        selection_.setOperand({0, Gemm::Fprop, Operand::X});
        auto* v = show<BlockMapView>("blocks");
        QCOMPARE(v->mapCount(), 4);
        QVERIFY(v->heading().contains("step 25"));
        auto* map = qobject_cast<QCPColorMap*>(v->plot()->plottable(1));
        QCOMPARE(map->data()->keySize(), 16);
        QCOMPARE(map->data()->valueSize(), 8);
        QCOMPARE(map->data()->cell(5, 2), std::log10(1.0 + 2 * 16 + 5));  // absmax of tile (2, 5)
        cursor_.setStep(10);  // before the block-map step 25 only step 0 exists
        set_->refreshNow();
        QVERIFY(v->heading().contains("step 0"));
        selection_.setOperand({1, Gemm::Fprop, Operand::X});  // no maps for this operand
        set_->refreshNow();
        QCOMPARE(v->mapCount(), 0);
    }

    void kernelView() {
        auto* v = show<KernelView>("kernels");
        const auto& boxes = v->timeline()->boxes();
        QCOMPARE(int(boxes.size()), spec_.ops_per_step);
        QCOMPARE(boxes[0].start_us, 0.0);
        QCOMPARE(boxes[1].end_us - boxes[1].start_us, (2000 + 10) * 1e-3);
        QCOMPARE(v->model().rowCount(), 6);
        v->timeline()->setView(0, 1);  // zoom in
        QCOMPARE(v->timeline()->viewEnd(), 1.0);
    }

    void layersViewSelectsOperand() {
        auto* v = show<LayersView>("layers");
        QCOMPARE(v->proxy()->rowCount(), spec_.linears * 6);
        v->filter()->setText("fc1");
        QCOMPARE(v->proxy()->rowCount(), spec_.linears / 2 * 6);
        const QModelIndex i = v->proxy()->index(4, 0);
        v->tableView()->setCurrentIndex(i);
        const OperandRef chosen = v->model().operandAt(v->proxy()->mapToSource(i).row());
        QCOMPARE(selection_.operand(), chosen);
        QCOMPARE(linear_label_of(chosen), QString("blocks.0.mlp.fc1"));
    }

    void eventsViewJumps() {
        auto* v = show<EventsView>("events");
        QCOMPARE(v->tableView()->model()->rowCount(), 3);
        v->jumpTo(2);
        QCOMPARE(cursor_.step(), 30);
    }

    void damagedRecordsDoNotCrash() {
        TraceBatch b;
        trace::BlockMapRecord bad;
        bad.key = {1, 45, 0, Gemm::Fprop, Operand::X};
        bad.grid_rows = 1000;
        bad.grid_cols = 1000;  // no values for that grid
        b.blockmaps.push_back(bad);
        b.ops.push_back({1, 49, 999, 77, 0, 3, 1, 10, 5});  // unknown op id, end before start
        b.events.push_back({42, 49, trace::EventKind(99), "?"});
        QVERIFY(store_.append(store_.generation(), std::move(b)));
        cursor_.setStep(49);
        for (const QString& name : ViewSet::names()) show<StoreView>(name.toLatin1().constData());
        QCOMPARE(qobject_cast<BlockMapView*>(set_->view("blocks"))->mapCount(), 0);
    }

    void exportsImages() {
        auto* v = show<LossView>("loss");
        const QString png = QDir::temp().filePath("fp8scope_loss_test.png");
        const QString pdf = QDir::temp().filePath("fp8scope_loss_test.pdf");
        QString error;
        QVERIFY(v->exportImage(png, &error));
        QVERIFY(v->exportImage(pdf, &error));
        QImage img(png);
        QCOMPARE(img.size(), v->size());
        QVERIFY(QFileInfo(pdf).size() > 1000);
        QVERIFY(!v->exportImage("/nonexistent-dir/x.png", &error));
        QVERIFY(error.contains("/nonexistent-dir/x.png"));
    }

private:
    QString linear_label_of(const OperandRef& r) {
        return store_.read([&](const TraceData& d) { return QString::fromStdString(d.meta.linears[r.linear].name); });
    }
};

int main(int argc, char** argv) {
    QApplication app(argc, argv);
    ViewsTest from_store(false), from_file(true);
    int rc = QTest::qExec(&from_store, argc, argv);
    rc |= QTest::qExec(&from_file, argc, argv);
    return rc;
}
#include "test_views.moc"
