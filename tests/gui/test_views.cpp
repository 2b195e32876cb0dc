// Every view drawn offscreen from the synthetic trace: the plotted points, heatmap cells,
// bars, timeline boxes and table rows are checked against the trace's formulas, and the
// cross-view flows (layers table selects the operand, events jump the cursor) run.
// The suite runs twice: on a store filled directly, and on the same trace written to an
// HDF5 file by capture's writer and read back through the GUI's file loader.
// With FP8SCOPE_SCREENSHOT_DIR set, each view is also saved as PNG for a look.
#include <QApplication>
#include <QComboBox>
#include <QLineEdit>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QSortFilterProxyModel>
#include <QTableView>
#include <QTest>
#include <algorithm>
#include <cmath>
#include <qcustomplot.h>

#include "models/display_names.h"
#include "models/outlier_comparison.h"
#include "models/trace_file_loader.h"
#include "real_run.h"
#include "show_view.h"
#include "stats_capture.h"
#include "synthetic_trace.h"
#include "trace_file.h"
#include "widgets/amax_view.h"
#include "widgets/blockmap_view.h"
#include "widgets/compare_run_combo.h"
#include "widgets/error_view.h"
#include "widgets/events_view.h"
#include "widgets/kernel_view.h"
#include "widgets/layers_view.h"
#include "widgets/loss_view.h"
#include "widgets/outliers_view.h"
#include "widgets/plot_style.h"
#include "widgets/timeline_widget.h"
#include "widgets/view_set.h"

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
        return t::show_view<V>(*set_, name, {1000, 640});
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
        set_ = t::open_view_set(store_, cursor_, selection_);
    }
    void cleanup() {
        t::close_view_set(set_);
        loader_.reset();
    }

    void cursorRangeFollowsStore() {
        QCOMPARE(cursor_.first(), 0);
        QCOMPARE(cursor_.last(), spec_.steps - 1);
        QCOMPARE(cursor_.step(), 37);
    }

    void lossView() {
        auto* v = show<LossView>("loss");
        const QList<QCPGraph*> loss = v->lossRect()->graphs();
        QCOMPARE(loss.size(), 2 * spec_.runs);  // loss and eval loss per run
        QCOMPARE(loss[2]->dataCount(), int(spec_.steps));
        QCOMPARE(at(loss[2], 17), t::loss_of(1, 17));
        QCOMPARE(loss[3]->dataCount(), 5);  // eval every 10 steps
        QCOMPARE(at(loss[3], 2), t::eval_loss_of(1, 20));
        const QList<QCPGraph*> diff = v->diffRect()->graphs();
        QCOMPARE(diff.size(), (spec_.runs - 1) * LossView::DiffGraphsPerRun);
        QCOMPARE(at(diff[LossView::DiffGraphsPerRun + LossView::DiffRaw], 9), t::loss_of(2, 9) - t::loss_of(0, 9));
        QCOMPARE(at(v->speedRect()->graphs()[0], 4), t::step_time_of(0, 4) * 1e3);
    }

    // Three operands, the current one in the middle: each curve holds its own operand's
    // amax and scale at every step, and its overflow steps.
    void amaxViewDrawsEverySelectedOperand() {
        const std::vector<OperandRef> refs{{0, Gemm::Dgrad, Operand::DY}, {2, Gemm::Fprop, Operand::X},
                                           {3, Gemm::Wgrad, Operand::X}};
        selection_.setOperands({refs[2], refs[0], refs[1]}, refs[1]);
        auto* v = show<AmaxView>("amax");
        QCOMPARE(v->operandCount(), 3);
        // The current operand's curve names its run beside the compared baseline's.
        const QStringList names{"L0 qkv dgrad dy", "L1 qkv fprop x (delayed \u2192 current @ step 20)", "L1 fc1 wgrad x"};
        for (int i = 0; i < 3; ++i) {
            QCOMPARE(v->operandAt(i), refs[i]);
            const int slot = refs[i].slot();
            QCPGraph* amax = v->graph(i, AmaxView::AmaxGraph);
            QCPGraph* scale = v->graph(i, AmaxView::ScaleGraph);
            QCOMPARE(amax->name(), names[i]);
            QCOMPARE(amax->dataCount(), int(spec_.steps));
            QCOMPARE(scale->dataCount(), int(spec_.steps));
            QVector<double> overflow;
            int above_max = 0;
            for (int s = 0; s < spec_.steps; ++s) {
                QCOMPARE(keyAt(amax, s), double(s));
                QCOMPARE(at(amax, s), double(t::amax_of(1, s, slot)));
                QCOMPARE(at(scale, s), double(t::scale_of(1, s, slot)));
                // Overflow: amax x scale rounds past E4M3's 448, that is beyond 464 (run 1
                // uses block1x128: E4M3). The scale from the step before puts the product
                // a little above 448 on most steps: those values round to 448, no overflow.
                const double product = double(t::amax_of(1, s, slot) * t::scale_of(1, s, slot));
                above_max += product > 448.0;
                if (product > 464.0) overflow << s;
            }
            QVERIFY(above_max > int(spec_.steps) / 2);
            QCPGraph* over = v->graph(i, AmaxView::OverflowGraph);
            QCOMPARE(over->dataCount(), int(overflow.size()));
            for (int k = 0; k < overflow.size(); ++k) {
                QCOMPARE(keyAt(over, k), overflow[k]);
                QCOMPARE(at(over, k), double(t::amax_of(1, std::int64_t(overflow[k]), slot)));
            }
            // One colour per operand, shared by its three graphs.
            const QColor c = amax->pen().color();
            QCOMPARE(scale->pen().color(), c);
            QCOMPARE(over->scatterStyle().brush().color(), c);
            for (int j = 0; j < i; ++j) QVERIFY(v->graph(j, AmaxView::AmaxGraph)->pen().color() != c);
        }
        // The history window is the current operand's, the one in force at cursor 37: the
        // 16 steps before it (the length from the capture at 30).
        const int slot = refs[1].slot();
        QCPGraph* hist = v->historyGraph();
        QCOMPARE(hist->dataCount(), 16);
        QCOMPARE(keyAt(hist, 0), 21.0);
        QCOMPARE(at(hist, 0), double(t::amax_of(1, 21, slot)));
        QCOMPARE(at(hist, 15), double(t::amax_of(1, 36, slot)));
        QVERIFY(hist->name().contains("L1 qkv fprop x"));
        expectLegendOutside(v->plot());
        // The cursor moves the window only.
        cursor_.setStep(12);
        set_->refreshNow();
        QCOMPARE(keyAt(v->historyGraph(), 0), 0.0);  // the window [-4, 12) from step 0 on
        QCOMPARE(v->historyGraph()->dataCount(), 12);
        QCOMPARE(at(v->graph(2, AmaxView::AmaxGraph), 40), double(t::amax_of(1, 40, refs[2].slot())));
        // Only the window's and the cursor's layers were redrawn: what shows is what a full
        // replot draws.
        const QImage partial = v->plot()->grab().toImage();
        v->plot()->replot();
        QCOMPARE(v->plot()->grab().toImage(), partial);
        // Picking one operand again leaves one curve.
        selection_.setOperand(refs[2]);
        set_->refreshNow();
        QCOMPARE(v->operandCount(), 1);
        QCOMPARE(at(v->graph(0, AmaxView::AmaxGraph), 7), double(t::amax_of(1, 7, refs[2].slot())));
    }

    // Every operand selected: the first kMaxOperands are drawn, the current one always,
    // and the legend says how many are left out.
    void amaxViewCapsTheCurves() {
        const std::vector<OperandRef> all = all_operands(spec_.linears);
        selection_.setOperands(all, all.back());
        auto* v = show<AmaxView>("amax");
        QCOMPARE(v->operandCount(), int(AmaxView::kMaxOperands));
        for (int i = 0; i + 1 < AmaxView::kMaxOperands; ++i) QCOMPARE(v->operandAt(i), all[i]);
        QCOMPARE(v->operandAt(AmaxView::kMaxOperands - 1), all.back());
        const int last = all.back().slot();
        QCOMPARE(at(v->graph(AmaxView::kMaxOperands - 1, AmaxView::AmaxGraph), 3), double(t::amax_of(1, 3, last)));
        const QStringList legend = legendEntries(v->plot());
        const int left_out = int(all.size()) - AmaxView::kMaxOperands;
        QVERIFY2(legend.filter(QString("%1 more selected").arg(left_out)).size() == 1, qPrintable(legend.join("; ")));
        expectLegendOutside(v->plot());
        // A narrower plot re-flows the legend into fewer columns, still off the data.
        const int wide = v->plot()->legend->wrap();
        v->resize(520, 640);
        QCoreApplication::processEvents();
        v->plot()->replot();
        QVERIFY(v->plot()->legend->wrap() < wide);
        expectLegendOutside(v->plot());
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
        QCPGraph* red = v->outlierChannels();
        QCOMPARE(red->dataCount(), 1);  // channel 7 holds the outlier
        QCOMPARE(red->data()->constBegin()->key, 7.0);
        QCOMPARE(red->data()->constBegin()->value, 50.0);
    }

    // The compared run (the baseline by default) beside the selected one, both at the newest
    // capture step both recorded: the baseline lacks capture 30 and has twice the kurtosis
    // and channel absmax, so at the cursor (37) runs 1 and 0 are compared at step 20.
    void outliersComparedRun() {
        TraceBatch b = t::synthetic_batch(spec_);
        std::erase_if(b.operands, [](const trace::OperandRecord& o) { return o.key.run == 0 && o.key.step == 30; });
        for (trace::OperandRecord& o : b.operands)
            if (o.key.run == 0) {
                o.stats.outliers.kurtosis *= 2;
                for (float& c : o.stats.outliers.channel_absmax) c *= 2;
            }
        SeriesStore store;
        StepCursor cursor;
        Selection selection;
        QVERIFY(store.append(store.reset(t::synthetic_meta(spec_)), std::move(b)));
        auto slot = [](int linear) { return trace::operand_slot(linear, Gemm::Dgrad, Operand::DY); };
        store.read([&](const TraceData& d) {
            QCOMPARE(common_capture_step(d.runs[1], d.runs[0], 37), 20);
            QCOMPARE(common_capture_step(d.runs[1], d.runs[2], 37), 30);
            QCOMPARE(common_capture_step(d.runs[1], d.runs[0], 9), 0);
            QCOMPARE(common_capture_step(d.runs[1], d.runs[0], -1), -1);
            const std::vector<KurtosisPair> pairs = kurtosis_pairs(d, d.runs[1], d.runs[0], Gemm::Dgrad, Operand::DY, 20);
            QCOMPARE(int(pairs.size()), spec_.linears);
            for (const KurtosisPair& p : pairs) {
                QCOMPARE(p.run, t::kurtosis_of(slot(p.linear), 20));
                QCOMPARE(p.other, 2 * t::kurtosis_of(slot(p.linear), 20));
            }
            // Step 30: the baseline has no capture there, and no older one stands in for it.
            const std::vector<KurtosisPair> at30 = kurtosis_pairs(d, d.runs[1], d.runs[0], Gemm::Dgrad, Operand::DY, 30);
            QCOMPARE(at30[2].run, t::kurtosis_of(slot(2), 30));
            QVERIFY(std::isnan(at30[2].other));
        });
        auto set = t::open_view_set(store, cursor, selection);
        selection.setOperand({1, Gemm::Dgrad, Operand::DY});
        cursor.setStep(37);
        auto* v = t::show_view<OutliersView>(*set, "outliers", {1000, 640});
        QCOMPARE(v->compareRun()->chosenRun(), 0);
        QCPBars *mine = v->kurtosisBars(), *theirs = v->otherKurtosisBars();
        QCOMPARE(mine->dataCount(), spec_.linears);
        QCOMPARE(theirs->dataCount(), spec_.linears);
        QCOMPARE((mine->data()->constBegin() + 3)->key, 2.8);  // beside linear 3's tick
        QCOMPARE((mine->data()->constBegin() + 3)->value, t::kurtosis_of(slot(3), 20));
        QCOMPARE((theirs->data()->constBegin() + 3)->key, 3.2);
        QCOMPARE((theirs->data()->constBegin() + 3)->value, 2 * t::kurtosis_of(slot(3), 20));
        QVERIFY2(mine->name().startsWith("delayed"), qPrintable(mine->name()));  // renamed by its recipe switch
        QCOMPARE(theirs->name(), QString("baseline"));
        QVERIFY(plot_title(v->kurtosisPlot()).contains("step 20"));
        // Channel absmax of linear 1: 1 + 0.01 c, channel 7 at 50; the baseline's twice that.
        auto* bars = qobject_cast<QCPBars*>(v->channelPlot()->plottable(0));
        QCOMPARE((bars->data()->constBegin() + 3)->value, double(1.0f + 0.01f * 3));
        QCPGraph* line = v->otherChannels();
        QCOMPARE(line->dataCount(), 64);
        QCOMPARE(at(line, 3), 2 * double(1.0f + 0.01f * 3));
        QCOMPARE(at(line, 7), 100.0);
        QVERIFY(line->name().startsWith("baseline"));
        QVERIFY(plot_title(v->channelPlot()).contains("step 20"));
        QVERIFY(plot_title(v->layersHeatmap()).contains("selected run only"));
        QVERIFY(plot_title(v->stepsHeatmap()).contains("selected run only"));
        // None: the selected run alone, at its own newest capture (30).
        v->compareRun()->chooseRun(-1);
        QTRY_COMPARE(v->otherKurtosisBars()->dataCount(), 0);
        QCOMPARE(v->otherChannels()->dataCount(), 0);
        QCOMPARE((mine->data()->constBegin() + 3)->key, 3.0);
        QCOMPARE((mine->data()->constBegin() + 3)->value, t::kurtosis_of(slot(3), 30));
        QVERIFY(!plot_title(v->layersHeatmap()).contains("selected run only"));
        t::close_view_set(set);
    }

    // A SwiGLU model's gate/up alignment: hidden without rows; with them one line per MLP
    // over the capture steps and the 0.9 mark, the title naming the most aligned layer at
    // the cursor, its leading channel and that channel's amax against the median's.
    void outliersGateUpAlignment() {
        auto* v = show<OutliersView>("outliers");
        QVERIFY(v->alignmentPlot()->isHidden());
        const int run = selection_.run();
        views::TraceBatch batch;
        for (std::int64_t step : {0, 10, 20, 30})
            for (int l : {1, 3}) {  // the synthetic trace's mlp.fc1 of layers 0 and 1
                trace::GateUpAlignmentRecord a;
                a.run = run, a.step = step, a.linear = l, a.channels = 128;
                a.max_abs_cos = l == 3 ? 0.1 + 0.25 * double(step / 10) : 0.12;  // layer 1: 0.1 .. 0.85
                a.aligned = l == 3 && step >= 20 ? 2 : 0;
                a.top_channel = l == 3 ? 17 : 5, a.top_cos = -0.8, a.top_norm_product = 2;
                a.top_down_amax = 30, a.down_amax_median = 1.5;
                batch.gate_up.push_back(a);
            }
        QVERIFY(store_.append(store_.generation(), std::move(batch)));
        const std::int64_t before = cursor_.step();
        cursor_.setStep(25);
        v = show<OutliersView>("outliers");
        QCustomPlot* p = v->alignmentPlot();
        QTRY_VERIFY(!p->isHidden());
        QCOMPARE(p->graphCount(), 3);
        QCOMPARE(p->graph(0)->name(), QString("layer 0"));
        QCOMPARE(p->graph(1)->name(), QString("layer 1"));
        QCOMPARE(p->graph(1)->dataCount(), 4);
        QCOMPARE((p->graph(1)->data()->constBegin() + 2)->key, 20.0);
        QCOMPARE((p->graph(1)->data()->constBegin() + 2)->value, 0.6);
        QCOMPARE(p->graph(0)->data()->constBegin()->value, 0.12);
        QCOMPARE(p->graph(2)->data()->constBegin()->value, 0.9);
        // At the cursor (25) the newest capture is 20: layer 1 at 0.60, channel 17, 30 / 1.5.
        const QString title = plot_title(p);
        QVERIFY2(title.contains("step 20") && title.contains("max |cos| 0.60") && title.contains("channel 17 leads") &&
                     title.contains("20.0x the median"),
                 qPrintable(title));
        QVERIFY2(title.contains(linear_label(store_.read([](const TraceData& d) { return d.meta; }), 3)), qPrintable(title));
        cursor_.setStep(before);
    }

    // The output statistic: layers x GEMM from the run's GemmErrorRecords at the cursor,
    // the figures as recorded, +inf SQNR (an unquantized GEMM) out of the colour range;
    // the title names the most damaged GEMM.
    void errorViewOutputStat() {
        const int run = selection_.run();
        views::TraceBatch batch;
        for (int l = 0; l < spec_.linears; ++l)
            for (int g = 0; g < 3; ++g)
                batch.gemm_errors.push_back({run, 0, l, Gemm(g), l == 0 && g == 2 ? INFINITY : 20.0 + l + 0.25 * g,
                                             0.01 * (g + 1), 0.5});
        QVERIFY(store_.append(store_.generation(), std::move(batch)));
        auto* v = show<ErrorView>("error");
        v->showOutputStat(OutputStat::Sqnr);
        QVERIFY(v->showsOutput());
        QCPColorMap* map = v->heatmap();
        QCOMPARE(map->data()->keySize(), 3);
        QCOMPARE(map->data()->valueSize(), spec_.linears);
        QCOMPARE(map->data()->cell(1, 2), 22.25);
        QCOMPARE(v->outputModel().value(0, 2), double(INFINITY));
        QVERIFY(std::isnan(map->data()->cell(2, 0)));  // exact: no colour, "exact" written in it
        QVERIFY(map->dataRange().upper < 30.0);
        QVERIFY(v->cellText(2, 1).contains("22.25"));
        // The title names the most damaged GEMM (the lowest SQNR: linear 0's fprop, 20 dB);
        // the colour scale says its unit.
        const QString linear0 = v->outputModel().linearName(0);
        QString title = plot_title(v->heatmapPlot());
        QVERIFY2(title.contains(QStringLiteral("most damaged: %1 %2, SQNR 20 dB").arg(linear0, gemm_label(Gemm::Fprop))),
                 qPrintable(title));
        QVERIFY(map->colorScale()->axis()->label().contains("dB"));
        v->showOutputStat(OutputStat::RelError);
        QCOMPARE(map->data()->cell(0, 3), 0.01);
        QCOMPARE(map->data()->cell(2, 0), 0.03);
        title = plot_title(v->heatmapPlot());  // the highest relative error now: wgrad's 0.03
        QVERIFY2(title.contains(QStringLiteral("most damaged: %1 %2, rel. error 0.03").arg(linear0, gemm_label(Gemm::Wgrad))),
                 qPrintable(title));
        // Back to operand errors for the tests after (the statistic combo is the first one).
        v->findChildren<QComboBox*>().first()->setCurrentIndex(static_cast<int>(selection_.stat()));
        QVERIFY(!v->showsOutput());
    }

    // The heatmap in its default mode: each recipe's SQNR minus per-tensor current's on
    // the same layer; the recipe in use (run 1: block1x128) outlined on every layer.
    void errorView() {
        selection_.setOperand({0, Gemm::Wgrad, Operand::DY});
        auto* v = show<ErrorView>("error");
        QCOMPARE(v->model().reference(), 0);  // current_e4m3
        QCPColorMap* map = v->heatmap();
        QCOMPARE(map->data()->keySize(), 4);
        QCOMPARE(map->data()->valueSize(), spec_.linears);
        const int slot = trace::operand_slot(2, Gemm::Wgrad, Operand::DY);
        for (int r = 0; r < 4; ++r)
            QCOMPARE(map->data()->cell(r, 2), t::sqnr_of(1, 30, slot, r) - t::sqnr_of(1, 30, slot, 0));
        QCOMPARE(map->dataRange().lower, -map->dataRange().upper);  // white at zero
        QVector<QPoint> outlined = v->outlinedCells();
        std::sort(outlined.begin(), outlined.end(), [](QPoint a, QPoint b) { return a.y() < b.y(); });
        QCOMPARE(outlined, (QVector<QPoint>{{1, 0}, {1, 1}, {1, 2}, {1, 3}}));
        QVERIFY(v->cellText(2, 1).contains("quantizer in use"));
        v->setDifferenceMode(false);
        QCOMPARE(map->data()->cell(3, 2), t::sqnr_of(1, 30, slot, 3));
        QCPGraph* g = v->stepsPlot()->graph(3);
        QCOMPARE(g->dataCount(), 5);
        QCOMPARE(at(g, 4), t::sqnr_of(1, 40, trace::operand_slot(0, Gemm::Wgrad, Operand::DY), 3));
        // One meaning of colour: blue the better, red the worse, whichever way the
        // statistic runs. SQNR rises with the quantizer's index (sqnr_of), underflow too
        // (0.5 per index) and SQNR falls down the layers (slots): the best SQNR is the last
        // column's first layer, the worst the first column's last layer.
        auto colour = [map](int recipe, int linear) {
            return QColor(map->gradient().color(map->data()->cell(recipe, linear), map->dataRange()));
        };
        const QColor best(kGoodnessStops.back()), worst(kGoodnessStops.front());
        QCOMPARE(colour(3, 0), best);
        QCOMPARE(colour(0, 3), worst);
        selection_.setStat(ErrorStat::UnderflowPct);
        set_->refreshNow();
        QCOMPARE(map->data()->cell(2, 0), 1.0);
        QCOMPARE(colour(3, 0), worst);
        QCOMPARE(colour(0, 0), best);
        v->setDifferenceMode(true);  // differences to current_e4m3 (0): the more underflow, the redder
        QCOMPARE(colour(3, 0), worst);
        const QColor zero = colour(0, 0), middle(kGoodnessStops[3]);  // zero: the light middle (up to the levels)
        QVERIFY(std::abs(zero.red() - middle.red()) <= 2 && std::abs(zero.blue() - middle.blue()) <= 2);
        selection_.setStat(ErrorStat::SqnrDb);
        set_->refreshNow();
        QCOMPARE(colour(3, 0), best);
    }

    // The recipes a real trace holds (13): every line gets its own colour, the legend sits
    // under the lines, never on them, and the heatmap has a column per recipe.
    void errorViewLegendAndColours() {
        const std::vector<std::string> names = trace::trace_recipe_names(default_analysis_recipes());
        // 11 what-ifs, the delayed pair, then FP4 training's quantizers and their rowwise copies'.
        const int n = int(names.size());
        QCOMPARE(n, 19);
        QCOMPARE(names[11], std::string("delayed_e4m3"));
        t::SyntheticSpec spec = spec_;
        spec.linears = 8;
        trace::TraceMeta meta = t::synthetic_meta(spec);
        meta.quantizers = names;
        TraceBatch batch = t::synthetic_batch(spec);
        for (trace::OperandRecord& o : batch.operands)
            while (o.errors.size() < names.size()) {
                ErrorStats e;
                e.sqnr_db = t::sqnr_of(o.key.run, o.key.step, trace::operand_slot(o.key.linear, o.key.gemm, o.key.operand),
                                       int(o.errors.size()));
                if (names[o.errors.size()].starts_with("delayed")) e.sqnr_db = -31.0;  // scale 1, no history
                o.errors.push_back(e);
            }
        QVERIFY(store_.append(store_.reset(meta), std::move(batch)));
        selection_.setOperand({1, Gemm::Fprop, Operand::W});
        selection_.setStat(ErrorStat::SqnrDb);
        auto* v = show<ErrorView>("error");
        v->setDifferenceMode(false);
        QCOMPARE(v->heatmap()->data()->keySize(), n);
        QVector<QColor> colours;
        QVector<QPoint> void_cells;
        for (int r = 0; r < n; ++r) {
            const bool delayed = names[r].starts_with("delayed");
            QCOMPARE(v->stepsPlot()->graph(r)->name(), QString::fromStdString(names[r]) + (delayed ? " (n/a)" : ""));
            // Run 1 trains with block1x128: the delayed quantizers' what-ifs (no history)
            // do not apply, on no layer and at no step.
            if (delayed) {
                QVERIFY(std::isnan(v->heatmap()->data()->cell(r, 3)));
                QCOMPARE(v->stepsPlot()->graph(r)->dataCount(), 0);
                for (int l = 0; l < spec.linears; ++l) void_cells << QPoint(r, l);
            } else {
                QCOMPARE(v->heatmap()->data()->cell(r, 3), t::sqnr_of(1, 30, trace::operand_slot(3, Gemm::Fprop, Operand::W), r));
            }
            colours << v->stepsPlot()->graph(r)->pen().color();
        }
        QVector<QPoint> shown = v->voidCells();
        std::sort(shown.begin(), shown.end(), [](QPoint a, QPoint b) { return std::pair(a.x(), a.y()) < std::pair(b.x(), b.y()); });
        QCOMPARE(shown, void_cells);
        QVERIFY(v->cellText(3, 11).contains("not applicable"));
        // The colour range is the figures that apply: sqnr_of's over layers and quantizers.
        QVERIFY(v->heatmap()->dataRange().lower > 25.0);
        expectDistinguishable(colours);
        expectLegendOutside(v->stepsPlot());
    }

    void paletteHasSixteenDistinctColours() {
        QVERIFY(kPaletteSize >= 16);
        QVector<QColor> colours;
        for (int i = 0; i < kPaletteSize; ++i) colours << series_color(i);
        expectDistinguishable(colours);
        QCOMPARE(series_color(kPaletteSize), series_color(0));
        // One family, one hue: the shades of block1x128 differ in lightness only.
        const QVector<QColor> r = recipe_colors({"current_e4m3", "block1x128_fp32", "block1x128_pow2"});
        QCOMPARE(r[1].hslHue(), r[2].hslHue());
        QVERIFY(r[1].lightness() < r[2].lightness());
        QVERIFY(r[0].hslHue() != r[1].hslHue());
    }

    void blockMapView() {
        selection_.setOperand({0, Gemm::Fprop, Operand::X});
        auto* v = show<BlockMapView>("blocks");
        // |x| absmax does not depend on the recipe: one map.
        QCOMPARE(v->mapCount(), 1);
        QVERIFY(v->heading().contains("step 25"));
        auto* map = qobject_cast<QCPColorMap*>(v->plot()->plottable(0));
        QCOMPARE(map->data()->keySize(), 16);
        QCOMPARE(map->data()->valueSize(), 8);
        QCOMPARE(map->data()->cell(5, 2), std::log10(1.0 + 2 * 16 + 5));  // absmax of tile (2, 5)
        QCOMPARE(map->colorScale()->dataRange().lower, 0.0);
        QCOMPARE(map->colorScale()->dataRange().upper, std::log10(128.0));
        QVERIFY(v->heading().contains("8x16 tiles of 32x32"));
        QCOMPARE(map->gradient(), viridis_gradient());
        // The maps are of step 25, the cursor is at 37: the heading says both.
        QVERIFY2(v->heading().contains("newest block maps at or before the cursor (step 37)"), qPrintable(v->heading()));
        // SQNR: a map per recipe, all of them E4M3 (MXFP8 E4M3 too) on one scale, the
        // goodness scale (blue the higher SQNR).
        v->setQuantity(BlockMapView::SqnrDb);
        set_->refreshNow();
        QCOMPARE(v->mapCount(), 4);
        auto* e4m3 = qobject_cast<QCPColorMap*>(v->plot()->plottable(0));
        auto* mx = qobject_cast<QCPColorMap*>(v->plot()->plottable(3));
        QCOMPARE(e4m3->colorScale(), mx->colorScale());
        QCOMPARE(mx->gradient(), goodness_gradient(Better::Higher));
        QCOMPARE(QColor(mx->gradient().color(1, QCPRange(0, 1))), QColor(kGoodnessStops.back()));
        QCOMPARE(mx->colorScale()->dataRange().lower, 20.0);
        // Same-shape grids at one size, whatever their titles; axis titles on the outer maps.
        const QList<QCPAxisRect*> rects = v->plot()->axisRects();
        for (QCPAxisRect* r : rects) {
            QCOMPARE(r->size(), rects.front()->size());
            QCOMPARE(r->axis(QCPAxis::atLeft)->range(), rects.front()->axis(QCPAxis::atLeft)->range());
        }
        QVERIFY(std::any_of(rects.begin(), rects.end(), [](QCPAxisRect* r) { return r->axis(QCPAxis::atLeft)->label() == "tile row"; }));
        QVERIFY(std::any_of(rects.begin(), rects.end(), [](QCPAxisRect* r) { return r->axis(QCPAxis::atBottom)->label() == "tile column"; }));
        // Minus per-tensor: each block quantizer's SQNR is 3 dB per recipe index above
        // current_e4m3's in every tile; scale_inv (rc + 1) times its, log10(rc + 1) apart.
        v->setQuantity(BlockMapView::SqnrDiff);
        set_->refreshNow();
        QCOMPARE(v->mapCount(), 3);
        for (int m = 0; m < 3; ++m) {
            auto* diff = qobject_cast<QCPColorMap*>(v->plot()->plottable(m));
            QVERIFY(std::abs(diff->data()->cell(5, 2) - 3.0 * (m + 1)) < 1e-4);
            QCOMPARE(diff->gradient(), goodness_gradient(Better::Higher));
            // White at zero. Block SQNR is stored as bfloat16 (8 significant bits): each
            // figure near 20-40 dB within 2^-9 x 64 = 0.125 of its value, the largest
            // difference within twice that of 9.
            const QCPRange r = diff->colorScale()->dataRange();
            QVERIFY(std::abs(r.upper - 9.0) <= 0.25 && r.lower == -r.upper);
        }
        v->setQuantity(BlockMapView::ScaleInvDiff);
        set_->refreshNow();
        QVERIFY(std::abs(qobject_cast<QCPColorMap*>(v->plot()->plottable(1))->data()->cell(3, 4) - std::log10(3.0)) < 1e-6);
        QCOMPARE(BlockMapView::quantityByName("sqnr_diff"), int(BlockMapView::SqnrDiff));
        v->setQuantity(BlockMapView::Absmax);
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

    // Ctrl-clicking rows picks several operands, the last clicked being the current one;
    // filtering does not drop them, and a choice made elsewhere shows in the table.
    void layersViewSelectsSeveralOperands() {
        auto* v = show<LayersView>("layers");
        QTableView* table = v->tableView();
        auto click = [&](int row, Qt::KeyboardModifiers mods) {
            QTest::mouseClick(table->viewport(), Qt::LeftButton, mods, table->visualRect(v->proxy()->index(row, 1)).center());
        };
        auto operand_of = [&](int row) { return v->model().operandAt(v->proxy()->mapToSource(v->proxy()->index(row, 0)).row()); };
        click(9, Qt::NoModifier);
        click(1, Qt::ControlModifier);
        click(4, Qt::ControlModifier);
        std::vector<OperandRef> expected{operand_of(1), operand_of(4), operand_of(9)};
        std::sort(expected.begin(), expected.end(), slot_order);
        QCOMPARE(selection_.operands(), expected);
        QCOMPARE(selection_.operand(), operand_of(4));
        v->filter()->setText("fc1");
        QCOMPARE(selection_.operands(), expected);
        v->filter()->clear();
        QCOMPARE(table->selectionModel()->selectedRows().size(), 3);
        // The amax view draws the three.
        auto* amax = show<AmaxView>("amax");
        QCOMPARE(amax->operandCount(), 3);
        for (int i = 0; i < 3; ++i)
            QCOMPARE(at(amax->graph(i, AmaxView::AmaxGraph), 20), double(t::amax_of(1, 20, expected[i].slot())));
        selection_.setOperand(operand_of(6));
        const QModelIndexList rows = table->selectionModel()->selectedRows();
        QCOMPARE(rows.size(), 1);
        QCOMPARE(rows[0].row(), 6);
        QCOMPARE(table->currentIndex().row(), 6);
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
    // Names of the legend's entries (a wrapped legend's grid also has empty cells).
    static QStringList legendEntries(QCustomPlot* plot) {
        QStringList names;
        for (int i = 0; i < plot->legend->itemCount(); ++i)
            if (auto* item = qobject_cast<QCPPlottableLegendItem*>(plot->legend->item(i)))
                names << item->plottable()->name();
        return names;
    }
    // The legend's entries lie in the plot, off the axis rect and its labels.
    static void expectLegendOutside(QCustomPlot* plot) {
        QCPLegend* legend = plot->legend;
        QVERIFY(legend->visible() && !legendEntries(plot).isEmpty());
        for (int i = 0; i < legend->itemCount(); ++i) {
            QCPAbstractLegendItem* item = legend->item(i);
            if (!item) continue;
            const QRect r = item->outerRect();
            QVERIFY(r.isValid());
            QVERIFY(!r.intersects(plot->axisRect()->outerRect()));
            QVERIFY(plot->viewport().contains(r));
        }
    }
    // Pairwise RGB distance of at least 45 of 441: no two look alike.
    static void expectDistinguishable(const QVector<QColor>& colours) {
        for (int i = 0; i < colours.size(); ++i)
            for (int j = 0; j < i; ++j) {
                const double d = std::hypot(colours[i].red() - colours[j].red(), colours[i].green() - colours[j].green(),
                                             colours[i].blue() - colours[j].blue());
                QVERIFY2(d >= 45, qPrintable(QString("%1 and %2").arg(colours[i].name(), colours[j].name())));
            }
    }
    QString linear_label_of(const OperandRef& r) {
        return store_.read([&](const TraceData& d) { return QString::fromStdString(d.meta.linears[r.linear].name); });
    }
};

// The amax view over the trace of a real lock-step run: at every captured step, each
// selected operand's curve holds the amax computed from the values the model captured.
class RealRunAmaxTest : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;
    std::vector<t::CapturedAmax> captured_;

private slots:
    void initTestCase() {
        QVERIFY(dir_.isValid());
        TrainConfig c = t::tiny_compare_config(12);
        c.compare = {"baseline", "delayed"};
        c.capture_every = 5;
        t::train_and_record(dir_.filePath("real.h5").toStdString(), c, 10, &captured_);
        QVERIFY(!captured_.empty());
    }

    void curvesHoldEachOperandsAmax() {
        SeriesStore store;
        StepCursor cursor;
        Selection selection;
        TraceFileLoader loader(&store);
        loader.open(dir_.filePath("real.h5"));
        QVERIFY(loader.wait(30000));
        QCoreApplication::processEvents();
        ViewSet set(&store, &cursor, &selection);
        const std::vector<OperandRef> refs{{0, Gemm::Fprop, Operand::X}, {2, Gemm::Fprop, Operand::X},
                                           {5, Gemm::Dgrad, Operand::DY}};
        selection.setRun(1);
        selection.setOperands(refs, refs[2]);
        auto* v = qobject_cast<AmaxView*>(set.view("amax"));  // the set deletes it
        v->resize(1000, 640);
        v->show();
        set.refreshNow();
        QCOMPARE(v->operandCount(), 3);
        for (int i = 0; i < 3; ++i) {
            QCPGraph* g = v->graph(i, AmaxView::AmaxGraph);
            int checked = 0;
            for (const t::CapturedAmax& c : captured_) {
                if (c.run != 1 || c.slot != refs[i].slot()) continue;
                auto it = g->data()->findBegin(double(c.step), false);
                QVERIFY(it != g->data()->constEnd() && it->key == double(c.step));
                QCOMPARE(it->value, double(c.amax));
                ++checked;
            }
            QCOMPARE(checked, 3);  // steps 1, 6, 11
            QCOMPARE(g->dataCount(), 12);  // amax is recorded at every step
        }
        QCOMPARE(v->graph(0, AmaxView::AmaxGraph)->name(), QString("L0 qkv fprop x"));
        QCOMPARE(v->graph(2, AmaxView::AmaxGraph)->name(), QString("L1 proj dgrad dy (delayed)"));  // and the baseline's
        v->hide();
    }
};

int main(int argc, char** argv) {
    QApplication app(argc, argv);
    ViewsTest from_store(false), from_file(true);
    RealRunAmaxTest real_run;
    int rc = QTest::qExec(&from_store, argc, argv);
    rc |= QTest::qExec(&from_file, argc, argv);
    rc |= QTest::qExec(&real_run, argc, argv);
    return rc;
}
#include "test_views.moc"
