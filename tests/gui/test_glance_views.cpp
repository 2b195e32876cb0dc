// The plots of issue 11, drawn offscreen from the synthetic trace: geometry and layer
// checks (the loss plots line up, markers sit under the curves, FP8 range marks where the
// scaled range falls), the shared step-plot interaction (click, hover, double-click,
// log y), events on the step plots, the channel envelope and the one-tile block map.
// With FP8SCOPE_SCREENSHOT_DIR set, the views are saved as PNG for a look.
#include <QApplication>
#include <QComboBox>
#include <QHeaderView>
#include <QSpinBox>
#include <QTableView>
#include <QTest>
#include <cmath>
#include <qcustomplot.h>

#include "models/model_roles.h"
#include "models/table_csv.h"
#include "show_view.h"
#include "synthetic_trace.h"
#include "widgets/amax_view.h"
#include "widgets/blockmap_view.h"
#include "widgets/error_view.h"
#include "widgets/event_markers.h"
#include "widgets/fp8_range_marks.h"
#include "widgets/kernel_view.h"
#include "widgets/layers_view.h"
#include "widgets/loss_view.h"
#include "widgets/outliers_view.h"
#include "widgets/plot_interaction.h"
#include "widgets/plot_style.h"
#include "widgets/timeline_widget.h"
#include "widgets/view_set.h"

using namespace fp8scope;
using namespace fp8scope::views;
namespace t = fp8scope::testing;

class GlanceViewsTest : public QObject {
    Q_OBJECT
    t::SyntheticSpec spec_;
    SeriesStore store_;
    StepCursor cursor_;
    Selection selection_;
    std::unique_ptr<ViewSet> set_;

    template <class V>
    V* show(const char* name) {
        return t::show_view<V>(*set_, name, {1000, 700}, "glance_");
    }
    static int layerIndex(QCustomPlot* p, const char* name) { return p->layer(name) ? p->layer(name)->index() : -1; }

private slots:
    void init() {
        QVERIFY(store_.append(store_.reset(t::synthetic_meta(spec_)), t::synthetic_batch(spec_)));
        set_ = t::open_view_set(store_, cursor_, selection_);
    }
    void cleanup() {
        t::close_view_set(set_);
    }

    // Three stacked plots on one step axis: same left edge and width, the loss plot the
    // tallest, a zoom of one moves all; events under the curves; the table exports.
    void lossPlotsAlign() {
        auto* v = show<LossView>("loss");
        QCPAxisRect *loss = v->lossRect(), *diff = v->diffRect(), *speed = v->speedRect();
        QCOMPARE(loss->left(), diff->left());
        QCOMPARE(loss->left(), speed->left());
        QCOMPARE(loss->width(), speed->width());
        QVERIFY(loss->height() > diff->height() && diff->height() > speed->height());
        QVERIFY(loss->height() > 150);
        diff->axis(QCPAxis::atBottom)->setRange(10, 20);
        QCOMPARE(loss->axis(QCPAxis::atBottom)->range(), QCPRange(10, 20));
        QCOMPARE(speed->axis(QCPAxis::atBottom)->range(), QCPRange(10, 20));
        QCOMPARE(speed->axis(QCPAxis::atLeft)->scaleType(), QCPAxis::stLogarithmic);
        // Three events, each on the three plots, on a layer under the curves.
        QCOMPARE(event_marker_count(v->plot()), 9);
        QVERIFY(layerIndex(v->plot(), "events") < layerIndex(v->plot(), "main"));
        // The eval difference and the smoothed difference: span 1 is the raw series.
        const QList<QCPGraph*> g = v->diffRect()->graphs();
        QCPGraph* eval = g[LossView::DiffEval];
        QCOMPARE(eval->dataCount(), 5);
        QCOMPARE(eval->data()->at(2)->value, t::eval_loss_of(1, 20) - t::eval_loss_of(0, 20));
        v->emaSpan()->setValue(1);
        for (int i : {0, 17, 49})
            QCOMPARE(v->diffRect()->graphs()[LossView::DiffSmoothed]->data()->at(i)->value,
                     v->diffRect()->graphs()[LossView::DiffRaw]->data()->at(i)->value);
        // Log y for one of the stacked plots leaves the others as they are.
        PlotInteraction::of(v->plot())->setLogY(true, loss);
        QVERIFY(PlotInteraction::of(v->plot())->logY(loss));
        QVERIFY(!PlotInteraction::of(v->plot())->logY(diff));
        QVERIFY(PlotInteraction::of(v->plot())->logY(speed));  // log from the start
        // "Export view table as CSV": the loss view has a table now.
        QVERIFY(v->table());
        QVERIFY(table_csv(*v->table()).contains("baseline,49,"));
        // Every run's row shows.
        auto* table = v->findChild<QTableView*>();
        const QModelIndex last = table->model()->index(table->model()->rowCount() - 1, 0);
        QVERIFY(table->viewport()->rect().contains(table->visualRect(last)));
    }

    void clickHoverZoomLogOnAmax() {
        auto* v = show<AmaxView>("amax");
        QCustomPlot* p = v->plot();
        PlotInteraction* in = PlotInteraction::of(p);
        QVERIFY(in);
        const QPoint at20(static_cast<int>(p->xAxis->coordToPixel(20)), p->axisRect()->center().y());
        QTest::mouseClick(p, Qt::LeftButton, Qt::NoModifier, at20);
        QCOMPARE(cursor_.step(), 20);
        const QString text = in->hoverText(at20);
        QVERIFY2(text.startsWith("step 20") && text.contains("L1 qkv fprop x (delayed \u2192 current @ step 20): " + format_figure(t::amax_of(1, 20, 12))),
                 qPrintable(text));
        QVERIFY(in->hoverText(QPoint(1, 1)).isEmpty());  // off the axis rect
        QTest::mouseMove(p, at20);
        QVERIFY(in->crosshair()->visible());
        p->xAxis->setRange(10, 12);
        QTest::mouseDClick(p, Qt::LeftButton, Qt::NoModifier, at20);
        QCOMPARE(p->xAxis->range().lower, 0.0);
        QCOMPARE(p->xAxis->range().upper, spec_.steps - 1.0);
        // The amax axis starts logarithmic; the toggle switches it.
        in->setLogY(true);
        QCOMPARE(p->yAxis->scaleType(), QCPAxis::stLogarithmic);
        in->setLogY(false);
        QCOMPARE(p->yAxis->scaleType(), QCPAxis::stLinear);
    }

    // The history markers sit under the amax line; the scale axis goes when no operand
    // has a scale; run 1's recipe switch is marked.
    void amaxMarkersAndScaleAxis() {
        auto* v = show<AmaxView>("amax");
        QCustomPlot* p = v->plot();
        QVERIFY(v->historyGraph()->layer()->index() < v->graph(0, AmaxView::AmaxGraph)->layer()->index());
        QCOMPARE(v->historyGraph()->scatterStyle().brush().style(), Qt::NoBrush);
        QVERIFY(p->yAxis2->visible());
        QCOMPARE(event_marker_count(p), 1);
        // A run without scales: every scale NaN.
        TraceBatch b = t::synthetic_batch(spec_);
        for (trace::ScalingRecord& s : b.scaling) std::fill(s.scale.begin(), s.scale.end(), NAN);
        QVERIFY(store_.append(store_.reset(t::synthetic_meta(spec_)), std::move(b)));
        set_->refreshNow();
        QVERIFY(!p->yAxis2->visible());
    }

    // Linear 3's dgrad dy (run 1, block1x128: the current-scaling scale 448 / amax): the
    // E4M3 max mark at log2(amax), min normal 2^-6 and min subnormal 2^-9 below in scaled
    // units; E5M2 likewise from 57344; E2M1 at 6 / amax: max at log2(amax), min normal 1
    // and min subnormal 0.5 in scaled units.
    void outlierRangeMarksAndTitle() {
        selection_.setOperand({1, Gemm::Dgrad, Operand::DY});
        auto* v = show<OutliersView>("outliers");
        QCustomPlot* p = v->layersHeatmap();
        QCOMPARE(fp8_mark_count(p), spec_.linears * 9);
        const int slot = trace::operand_slot(3, Gemm::Dgrad, Operand::DY);
        const double amax = t::amax_of(1, 30, slot);
        QList<double> row3;
        for (int i = 0; i < p->itemCount(); ++i)
            if (auto* l = qobject_cast<QCPItemLine*>(p->item(i)); l && l->start->coords().y() == 2.5) row3 << l->start->coords().x();
        QCOMPARE(row3.size(), 9);
        const double e4m3 = std::log2(448.0 / amax);  // log2 of the scale
        QVERIFY(std::abs(row3[0] - (std::log2(amax) - 0.5)) < 1e-4);
        QVERIFY(std::abs(row3[1] - (-6 - e4m3 - 0.5)) < 1e-4);
        QVERIFY(std::abs(row3[2] - (-9 - e4m3 - 0.5)) < 1e-4);
        QVERIFY(std::abs(row3[5] - (-16 - std::log2(57344.0 / amax) - 0.5)) < 1e-4);
        const double e2m1 = std::log2(6.0 / amax);
        QVERIFY(std::abs(row3[6] - (std::log2(amax) - 0.5)) < 1e-4);
        QVERIFY(std::abs(row3[7] - (0 - e2m1 - 0.5)) < 1e-4);
        QVERIFY(std::abs(row3[8] - (-1 - e2m1 - 0.5)) < 1e-4);
        // The axis shows every mark: what falls off either end.
        QVERIFY(p->xAxis->range().lower < row3[5]);
        const QString title = plot_title(p);
        QVERIFY2(title.contains("dgrad dy") && title.contains("delayed") && title.contains("step 30"), qPrintable(title));
        QVERIFY(fp8_mark_count(v->stepsHeatmap()) > 0);
        QVERIFY(plot_title(v->channelPlot()).contains("step 30"));
    }

    // 4096 channels, one spike: the envelope keeps it whatever the plot's width.
    void channelEnvelope() {
        std::vector<float> v(4096, 1.0f);
        v[1001] = 100.0f;
        v[3] = 0.5f;
        const std::vector<ChannelBucket> b = channel_envelope(v, 400);
        QCOMPARE(int(b.size()), 400);
        QCOMPARE(b[0].min, 0.5);
        QCOMPARE(b[0].max, 1.0);
        double top = 0;
        for (const ChannelBucket& k : b) top = std::max(top, k.max);
        QCOMPARE(top, 100.0);
        QCOMPARE(int(channel_envelope(v, 10000).size()), 4096);  // never more buckets than channels
        QVERIFY(channel_envelope({}, 10).empty());
    }

    // A tensor of one tile at the block size: text, no map.
    void blockMapOfOneTile() {
        TraceBatch b;
        for (int rc = 0; rc < 2; ++rc) {
            trace::BlockMapRecord m;
            m.key = {1, 45, 0, Gemm::Fprop, Operand::X};
            m.quantizer = rc;
            m.rows = 32; m.cols = 64;
            m.tile_rows = 128; m.tile_cols = 128;
            m.grid_rows = 1; m.grid_cols = 1;
            m.absmax = {3.0f};
            m.scale_inv = {3.0f / 448};
            m.sqnr_db = {30.0f + rc};
            b.blockmaps.push_back(m);
        }
        QVERIFY(store_.append(store_.generation(), std::move(b)));
        cursor_.setStep(49);
        selection_.setOperand({0, Gemm::Fprop, Operand::X});
        auto* v = show<BlockMapView>("blocks");
        QVERIFY(v->oneTile());
        QCOMPARE(v->plot()->plottableCount(), 0);
        v->setQuantity(BlockMapView::SqnrDb);
        QVERIFY(v->oneTile());
        QCOMPARE(v->mapCount(), 2);
    }

    // Tiles are square whatever the plot's shape; ticks only on tiles that exist.
    void blockTilesSquare() {
        selection_.setOperand({0, Gemm::Fprop, Operand::X});
        auto* v = show<BlockMapView>("blocks");
        QCPAxisRect* rect = v->plot()->axisRects().first();
        QCPAxis *x = rect->axis(QCPAxis::atBottom), *y = rect->axis(QCPAxis::atLeft);
        const double w = std::abs(x->coordToPixel(1) - x->coordToPixel(0)), h = std::abs(y->coordToPixel(1) - y->coordToPixel(0));
        QVERIFY2(std::abs(w - h) < 1, qPrintable(QString("%1 x %2").arg(w).arg(h)));
        const auto ticks = qSharedPointerCast<QCPAxisTickerText>(x->ticker())->ticks();
        QCOMPARE(ticks.firstKey(), 0.0);
        QVERIFY(ticks.lastKey() <= 15 && ticks.size() <= 8);
    }

    // Numbers never wrap: every column at least as wide as its contents.
    void layersColumnsFit() {
        selection_.setRun(0);
        auto* v = show<LayersView>("layers");
        QTableView* table = v->tableView();
        QVERIFY(!table->wordWrap());
        QCOMPARE(v->whatIf()->currentText(), QString("current_e4m3"));
        const QFontMetrics fm(table->font());
        for (int c = LayersModel::Amax; c < LayersModel::ColumnCount; ++c) {
            QCOMPARE(table->horizontalHeader()->sectionResizeMode(c), QHeaderView::ResizeToContents);
            for (int r = 0; r < table->model()->rowCount(); ++r) {
                const QString text = table->model()->data(table->model()->index(r, c)).toString();
                QVERIFY2(table->columnWidth(c) > fm.horizontalAdvance(text), qPrintable(text));
            }
        }
        QVERIFY(!table->model()->data(table->model()->index(0, LayersModel::SqnrDb)).toString().isEmpty());
    }

    void kernelsOverTheRun() {
        auto* v = show<KernelView>("kernels");
        QCOMPARE(v->model().steps(), 1);
        v->setScope(KernelStatsModel::WholeRun);
        QCOMPARE(v->model().steps(), int(spec_.steps));
        v->setTimelineSteps(3);
        QCOMPARE(int(v->timeline()->boxes().size()), 3 * spec_.ops_per_step);
    }

    // The heatmap's tooltip names the cell.
    void errorHeatmapHover() {
        auto* v = show<ErrorView>("error");
        QCustomPlot* p = v->heatmapPlot();
        const QPoint cell(static_cast<int>(p->xAxis->coordToPixel(2)), static_cast<int>(p->yAxis->coordToPixel(1)));
        const QString text = PlotInteraction::of(p)->hoverText(cell);
        QVERIFY2(text.contains("block128x128") && text.contains("blocks.0.mlp.fc1"), qPrintable(text));
    }

    // Nothing in the store, or no capture steps: every view draws without crashing.
    void emptyTraces() {
        store_.clear();
        for (const QString& name : ViewSet::names()) show<StoreView>(name.toLatin1().constData());
        TraceBatch b = t::synthetic_batch(spec_);
        b.operands.clear();
        b.blockmaps.clear();
        for (trace::StepRecord& s : b.steps) s.loss = NAN;
        QVERIFY(store_.append(store_.reset(t::synthetic_meta(spec_)), std::move(b)));
        for (const QString& name : ViewSet::names()) show<StoreView>(name.toLatin1().constData());
    }
};

int main(int argc, char** argv) {
    QApplication app(argc, argv);
    GlanceViewsTest test;
    return QTest::qExec(&test, argc, argv);
}
#include "test_glance_views.moc"
