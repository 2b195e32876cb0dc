// One run compared with another in the Amax, Error and Layers views: the default run to
// compare with, the other run's series, its error figures or the differences, the layers
// table's delta columns, and an operand whose shape differs in the two runs (a linear of
// one name in two models), checked against the synthetic trace's formulas.
#include <QAbstractItemModelTester>
#include <QHeaderView>
#include <QSortFilterProxyModel>
#include <QTableView>
#include <QTest>
#include <qcustomplot.h>

#include "models/layers_model.h"
#include "models/model_roles.h"
#include "models/recipe_error_model.h"
#include "models/run_comparison.h"
#include "show_view.h"
#include "synthetic_trace.h"
#include "widgets/amax_view.h"
#include "widgets/compare_run_combo.h"
#include "widgets/error_view.h"
#include "widgets/layers_view.h"
#include "widgets/plot_style.h"

using namespace fp8scope;
using namespace fp8scope::views;
namespace t = fp8scope::testing;

namespace {
int slot(int linear) { return trace::operand_slot(linear, Gemm::Fprop, Operand::X); }
int slot(const OperandRef& r) { return r.slot(); }
constexpr std::int64_t kStep = 37, kCapture = 30;  // the cursor and its capture step
constexpr std::int64_t kOtherNumel = 32 * 96;      // run 2's linear 1: another model's shape
}  // namespace

class RunComparisonTest : public QObject {
    Q_OBJECT
    SeriesStore store_;
    StepCursor cursor_;
    Selection selection_;
    t::SyntheticSpec spec_;

private slots:
    void init() {
        const auto gen = store_.reset(t::synthetic_meta(spec_));
        TraceBatch b = t::synthetic_batch(spec_);
        for (trace::OperandRecord& o : b.operands)
            if (o.key.run == 2 && o.key.linear == 1) o.stats.numel = kOtherNumel;
        QVERIFY(store_.append(gen, std::move(b)));
    }

    void defaultsToTheBaseline() {
        const trace::TraceMeta meta = t::synthetic_meta(spec_);
        QCOMPARE(default_compare_run(meta, 1), 0);
        QCOMPARE(default_compare_run(meta, 2), 0);
        QCOMPARE(default_compare_run(meta, 0), -1);  // the baseline itself
        trace::TraceMeta none = meta;
        none.baseline_run = -1;
        QCOMPARE(default_compare_run(none, 1), -1);
        CompareRunCombo combo;
        combo.fill(meta);
        QCOMPARE(combo.count(), 1 + spec_.runs);
        QCOMPARE(combo.chosenRun(), 0);
        QCOMPARE(combo.otherThan(1), 0);
        QCOMPARE(combo.otherThan(0), -1);
        combo.chooseRun(2);
        combo.fill(meta);  // the same runs: the choice stays
        QCOMPARE(combo.chosenRun(), 2);
        combo.chooseRun(-1);
        QCOMPARE(combo.currentText(), QString("none"));
        QCOMPARE(combo.otherThan(1), -1);
    }

    void slotSeriesAndShapes() {
        store_.read([&](const TraceData& d) {
            const SlotSeries s = slot_series(d.runs[0], 7);
            QCOMPARE(s.step.size(), qsizetype(spec_.steps));
            for (int i = 0; i < spec_.steps; ++i) {
                QCOMPARE(s.step[i], double(i));
                QCOMPARE(s.amax[i], double(t::amax_of(0, i, 7)));
                QCOMPARE(s.scale[i], double(t::scale_of(0, i, 7)));
            }
            QVERIFY(slot_series(d.runs[0], d.slot_count()).step.isEmpty());
            const auto [a, b] = compared_numel(d, 2, 0, {1, Gemm::Fprop, Operand::X}, kStep);
            QCOMPARE(a, kOtherNumel);
            QCOMPARE(b, std::int64_t(64 * 128));
            const QString note = shapes_differ_note(d, 2, 0, {1, Gemm::Fprop, Operand::X}, kStep);
            QVERIFY2(note.contains("shapes differ") && note.contains("3072") && note.contains("8192"), qPrintable(note));
            QVERIFY(shapes_differ_note(d, 1, 0, {1, Gemm::Fprop, Operand::X}, kStep).isEmpty());
            QVERIFY(shapes_differ_note(d, 2, 0, {0, Gemm::Fprop, Operand::X}, kStep).isEmpty());
        });
    }

    void errorFiguresOfTheOtherRunAndDifferences() {
        RecipeErrorModel m(&store_);
        QAbstractItemModelTester tester(&m, QAbstractItemModelTester::FailureReportingMode::QtTest);
        using RC = RecipeErrorModel::RunCompare;
        m.refresh(1, kStep, Gemm::Fprop, Operand::X, ErrorStat::SqnrDb, 0, RC::Off);  // other ignored
        QCOMPARE(m.value(3, 2), t::sqnr_of(1, kCapture, slot(3), 2));
        QCOMPARE(m.otherRun(), -1);
        m.refresh(1, kStep, Gemm::Fprop, Operand::X, ErrorStat::SqnrDb, 0, RC::OtherRun);
        for (int l = 0; l < spec_.linears; ++l)
            for (int r = 0; r < 4; ++r) QCOMPARE(m.value(l, r), t::sqnr_of(0, kCapture, slot(l), r));
        QCOMPARE(m.recipeInUse(0), -1);  // the baseline's: unquantized
        QCOMPARE(m.headerData(1, Qt::Horizontal, Qt::DisplayRole).toString(), QString("current_e4m3 (baseline)"));
        m.refresh(1, kStep, Gemm::Fprop, Operand::X, ErrorStat::SqnrDb, 0, RC::Difference);
        for (int l = 0; l < spec_.linears; ++l)
            for (int r = 0; r < 4; ++r)
                QCOMPARE(m.value(l, r), t::sqnr_of(1, kCapture, slot(l), r) - t::sqnr_of(0, kCapture, slot(l), r));
        QCOMPARE(m.recipeInUse(0), 1);  // run 1's: block1x128
        QVERIFY(m.compareLabel().endsWith(" - baseline"));
        m.refresh(1, kStep, Gemm::Fprop, Operand::X, ErrorStat::UnderflowPct, 2, RC::Difference);
        QCOMPARE(m.value(0, 3), 0.0);  // 0.5 x 3 in both
        // Run 2's linear 1 is another shape: no difference, hatched with the reason.
        m.refresh(2, kStep, Gemm::Fprop, Operand::X, ErrorStat::SqnrDb, 0, RC::Difference);
        for (int r = 0; r < 4; ++r) {
            QVERIFY(!m.applies(1, r) && std::isnan(m.value(1, r)));
            QVERIFY(m.voidReason(1, r).contains("shapes differ"));
            QCOMPARE(m.value(2, r), t::sqnr_of(2, kCapture, slot(2), r) - t::sqnr_of(0, kCapture, slot(2), r));
        }
        m.refresh(2, kStep, Gemm::Fprop, Operand::X, ErrorStat::SqnrDb, 0, RC::OtherRun);
        QVERIFY(m.applies(1, 0));  // the other run's own figures stand, with the note
        QCOMPARE(m.value(1, 0), t::sqnr_of(0, kCapture, slot(1), 0));
        QVERIFY(m.shapeNote(1).contains("shapes differ"));
    }

    void layersDeltaColumns() {
        LayersModel m(&store_);
        QAbstractItemModelTester tester(&m, QAbstractItemModelTester::FailureReportingMode::QtTest);
        m.refresh(1, kStep, 0, -1);
        QCOMPARE(m.columnCount(), int(LayersModel::ColumnCount));
        m.refresh(1, kStep, 0, 0);  // run 1 minus the baseline, whose figures are current_e4m3's what-if
        QVERIFY(m.compared());
        QCOMPARE(m.columnCount(), int(LayersModel::ComparedColumnCount));
        QCOMPARE(m.rowCount(), spec_.linears * 6);
        auto v = [&](int row, int c) { return m.data(m.index(row, c), kValueRole).toDouble(); };
        for (int row = 0; row < m.rowCount(); ++row) {
            const int s = slot(m.operandAt(row));
            QCOMPARE(v(row, LayersModel::DeltaAmax), double(t::amax_of(1, kStep, s)) - double(t::amax_of(0, kStep, s)));
            QCOMPARE(v(row, LayersModel::DeltaScale), double(t::scale_of(1, kStep, s)) - double(t::scale_of(0, kStep, s)));
            QCOMPARE(v(row, LayersModel::DeltaKurtosis), 0.0);
            // Run 1 trains with block1x128 (quantizer 1); the unquantized baseline's figures are
            // its what-if under block1x128 too, not the table's what-if (current_e4m3).
            QCOMPARE(v(row, LayersModel::SqnrDb), t::sqnr_of(1, kCapture, s, 1));
            QCOMPARE(v(row, LayersModel::DeltaSqnrDb), t::sqnr_of(1, kCapture, s, 1) - t::sqnr_of(0, kCapture, s, 1));
            QCOMPARE(v(row, LayersModel::DeltaUnderflowPct), 0.0);
            QCOMPARE(v(row, LayersModel::DeltaOverflowPct), 0.0);
        }
        QCOMPARE(m.headerData(LayersModel::DeltaSqnrDb, Qt::Horizontal, Qt::DisplayRole).toString(), QString("\u0394 sqnr dB"));
        // Two quantized runs: each its own quantizer's figures (run 2 trains with block128x128).
        m.refresh(1, kStep, 0, 2);
        for (int row = 0; row < 6; ++row) {
            const int s = slot(m.operandAt(row));
            QCOMPARE(v(row, LayersModel::DeltaSqnrDb), t::sqnr_of(1, kCapture, s, 1) - t::sqnr_of(2, kCapture, s, 2));
            QCOMPARE(v(row, LayersModel::DeltaUnderflowPct), 0.5 * 1 - 0.5 * 2);
        }
        // The baseline selected, run 1 compared: the baseline's what-if is run 1's quantizer.
        m.refresh(0, kStep, 0, 1);
        QCOMPARE(v(0, LayersModel::DeltaSqnrDb), t::sqnr_of(0, kCapture, slot(m.operandAt(0)), 1) - t::sqnr_of(1, kCapture, slot(m.operandAt(0)), 1));
        QCOMPARE(v(0, LayersModel::SqnrDb), t::sqnr_of(0, kCapture, slot(m.operandAt(0)), 0));  // the table's what-if
        // Run 2 minus the baseline: linear 1 has another shape there.
        m.refresh(2, kStep, 0, 0);
        int shapes = 0;
        for (int row = 0; row < m.rowCount(); ++row) {
            const bool other_shape = m.operandAt(row).linear == 1;
            for (int c = LayersModel::ColumnCount; c < LayersModel::ComparedColumnCount; ++c) {
                QCOMPARE(std::isnan(v(row, c)), other_shape);
                if (!other_shape) continue;
                QCOMPARE(m.data(m.index(row, c), Qt::DisplayRole).toString(), QString("shapes differ"));
                QVERIFY(m.data(m.index(row, c), Qt::ToolTipRole).toString().contains("3072"));
                ++shapes;
            }
            if (!other_shape)
                QCOMPARE(v(row, LayersModel::DeltaAmax),
                         double(t::amax_of(2, kStep, slot(m.operandAt(row)))) - double(t::amax_of(0, kStep, slot(m.operandAt(row)))));
        }
        QCOMPARE(shapes, 6 * LayersModel::kDeltaColumns);
        m.refresh(0, kStep, 0, 0);  // the baseline with itself: nothing compared
        QVERIFY(!m.compared());
        QCOMPARE(m.columnCount(), int(LayersModel::ColumnCount));
    }

    // A baseline that records amax only at its capture steps (a float32 run) and, here, was
    // not captured at step 30: the deltas compare both runs at one step, amax at step 30
    // (the newest both recorded) and the capture figures at step 20.
    void deltasAtTheNewestCommonStep() {
        QCOMPARE(newest_common_step(std::vector<double>{0, 10, 20, 30}, std::vector<std::int64_t>{0, 5, 10, 25}, 37), 10);
        QCOMPARE(newest_common_step(std::vector<double>{0, 10}, std::vector<std::int64_t>{0, 10}, 10), 10);
        QCOMPARE(newest_common_step(std::vector<double>{5}, std::vector<std::int64_t>{6}, 37), -1);
        TraceBatch b = t::synthetic_batch(spec_);
        std::erase_if(b.scaling, [](const trace::ScalingRecord& r) { return r.run == 0 && r.step % 10 != 0; });
        std::erase_if(b.operands, [](const trace::OperandRecord& o) { return o.key.run == 0 && o.key.step == 30; });
        QVERIFY(store_.append(store_.reset(t::synthetic_meta(spec_)), std::move(b)));
        LayersModel m(&store_);
        m.refresh(1, kStep, 0, 0);
        auto v = [&](int row, int c) { return m.data(m.index(row, c), kValueRole).toDouble(); };
        for (int row = 0; row < m.rowCount(); ++row) {
            const int s = slot(m.operandAt(row));
            QCOMPARE(v(row, LayersModel::Amax), double(t::amax_of(1, kStep, s)));  // the run's own, at the cursor
            QCOMPARE(v(row, LayersModel::DeltaAmax), double(t::amax_of(1, 30, s)) - double(t::amax_of(0, 30, s)));
            QCOMPARE(v(row, LayersModel::DeltaSqnrDb), t::sqnr_of(1, 20, s, 1) - t::sqnr_of(0, 20, s, 1));
            QCOMPARE(v(row, LayersModel::DeltaKurtosis), t::kurtosis_of(s, 20) - t::kurtosis_of(s, 20));
        }
        QVERIFY(m.data(m.index(0, LayersModel::DeltaAmax), Qt::ToolTipRole).toString().contains("step 30"));
        QVERIFY(m.data(m.index(0, LayersModel::DeltaSqnrDb), Qt::ToolTipRole).toString().contains("step 20"));
        RecipeErrorModel e(&store_);
        e.refresh(1, kStep, Gemm::Fprop, Operand::X, ErrorStat::SqnrDb, 0, RecipeErrorModel::RunCompare::Difference);
        QCOMPARE(e.value(2, 3), t::sqnr_of(1, 20, slot(2), 3) - t::sqnr_of(0, 20, slot(2), 3));
        e.refresh(1, kStep, Gemm::Fprop, Operand::X, ErrorStat::SqnrDb, 0, RecipeErrorModel::RunCompare::OtherRun);
        QCOMPARE(e.value(2, 3), t::sqnr_of(0, 20, slot(2), 3));  // the other run's newest
    }

    void amaxViewOverlaysTheOtherRun() {
        auto set = t::open_view_set(store_, cursor_, selection_);
        auto* v = t::show_view<AmaxView>(*set, "amax", {900, 600}, "compare_");
        QCOMPARE(v->compareRun()->chosenRun(), 0);
        QCPGraph* other = v->otherGraph(AmaxView::AmaxGraph);
        QVERIFY(other);
        const int s = trace::operand_slot(2, Gemm::Fprop, Operand::X);
        QCOMPARE(other->data()->size(), int(spec_.steps));
        for (int i = 0; i < spec_.steps; ++i) {
            QCOMPARE(other->data()->at(i)->key, double(i));
            QCOMPARE(other->data()->at(i)->value, double(t::amax_of(0, i, s)));
            QCOMPARE(v->otherGraph(AmaxView::ScaleGraph)->data()->at(i)->value, double(t::scale_of(0, i, s)));
        }
        QVERIFY(other->name().endsWith("(baseline)"));
        QVERIFY(v->graph(0, AmaxView::AmaxGraph)->name().contains("(delayed"));  // run 1, named in the legend too
        QCOMPARE(other->pen().color(), series_color(0));
        v->compareRun()->chooseRun(2);
        set->refreshNow();
        QCOMPARE(v->otherGraph(AmaxView::AmaxGraph)->data()->at(5)->value, double(t::amax_of(2, 5, s)));
        v->compareRun()->chooseRun(-1);
        set->refreshNow();
        QVERIFY(!v->otherGraph(AmaxView::AmaxGraph));
        t::close_view_set(set);
    }

    void errorViewShowsTheOtherRunOrTheDifference() {
        auto set = t::open_view_set(store_, cursor_, selection_);
        auto* v = t::show_view<ErrorView>(*set, "error", {900, 700});
        QCOMPARE(v->compareRun()->chosenRun(), 0);
        v->setMode(ErrorView::RunDifference);
        set->refreshNow();
        QCOMPARE(v->model().runCompare(), RecipeErrorModel::RunCompare::Difference);
        QCOMPARE(v->model().value(2, 1), t::sqnr_of(1, kCapture, slot(2), 1) - t::sqnr_of(0, kCapture, slot(2), 1));
        // Differences: the goodness scale, symmetric about zero (white: no change).
        QCOMPARE(v->heatmap()->dataRange().lower, -v->heatmap()->dataRange().upper);
        QVERIFY(v->cellText(2, 1).contains("baseline"));
        if (const QByteArray dir = qgetenv("FP8SCOPE_SCREENSHOT_DIR"); !dir.isEmpty()) v->grab().save(QString(dir) + "/compare_error.png");
        v->setMode(ErrorView::OtherRunValues);
        set->refreshNow();
        QCOMPARE(v->model().value(3, 0), t::sqnr_of(0, kCapture, slot(3), 0));
        // The lines below: run 1's solid, the baseline's dashed, one per quantizer each, and
        // one legend entry that tells them apart.
        QCOMPARE(v->stepsPlot()->graphCount(), 2 * 4 + 1);
        QCOMPARE(v->stepsPlot()->graph(4)->pen().style(), Qt::DashLine);
        auto in_legend = [&] {
            int n = 0;
            for (int i = 0; i < v->stepsPlot()->graphCount(); ++i) n += v->stepsPlot()->legend->hasItemWithPlottable(v->stepsPlot()->graph(i));
            return n;
        };
        QCOMPARE(in_legend(), 4 + 1);
        QVERIFY(v->stepsPlot()->graph(8)->name().endsWith("dashed: baseline"));
        QCOMPARE(v->stepsPlot()->graph(4)->data()->at(3)->value, t::sqnr_of(0, kCapture, slot(2), 0));
        v->setMode(ErrorView::Values);
        set->refreshNow();
        QCOMPARE(v->stepsPlot()->graphCount(), 4);
        QCOMPARE(in_legend(), 4);
        QCOMPARE(v->model().value(3, 0), t::sqnr_of(1, kCapture, slot(3), 0));
        t::close_view_set(set);
    }

    void layersViewShowsDeltasBesideTheFigures() {
        auto set = t::open_view_set(store_, cursor_, selection_);
        auto* v = t::show_view<LayersView>(*set, "layers", {1400, 600}, "compare_");
        QCOMPARE(v->compareRun()->chosenRun(), 0);
        QCOMPARE(v->proxy()->columnCount(), int(LayersModel::ComparedColumnCount));
        const QHeaderView* h = v->tableView()->horizontalHeader();
        for (int c = 0; c < LayersModel::kDeltaColumns; ++c)
            QCOMPARE(h->visualIndex(LayersModel::ColumnCount + c), h->visualIndex(LayersModel::kDeltaOf[c]) + 1);
        // The current operand stays selected in the table.
        QCOMPARE(v->model().operandAt(v->proxy()->mapToSource(v->tableView()->currentIndex()).row()),
                 (OperandRef{2, Gemm::Fprop, Operand::X}));
        v->compareRun()->chooseRun(-1);
        set->refreshNow();
        QCOMPARE(v->proxy()->columnCount(), int(LayersModel::ColumnCount));
        t::close_view_set(set);
    }
};

QTEST_MAIN(RunComparisonTest)
#include "test_run_comparison.moc"
