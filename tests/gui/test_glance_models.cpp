// The tables behind "each view answers its question at a glance" (issue 11), without
// widgets, against hand-computed figures of the synthetic trace: the loss summary and its
// CSV, the error heatmap's difference mode, the layers table's what-if figures and colour
// cues, the events' run names, the kernel statistics over a run, the EMA, and the block
// map interval a launched run gets.
#include <QAbstractItemModelTester>
#include <QColor>
#include <QSet>
#include <QTest>

#include "models/display_names.h"
#include "models/engine_launch.h"
#include "models/events_model.h"
#include "models/kernel_stats_model.h"
#include "models/layers_model.h"
#include "models/loss_summary_model.h"
#include "models/model_roles.h"
#include "models/recipe_error_model.h"
#include "models/smoothing.h"
#include "models/table_csv.h"
#include "synthetic_trace.h"

using namespace fp8scope;
using namespace fp8scope::views;
namespace t = fp8scope::testing;

class GlanceModelsTest : public QObject {
    Q_OBJECT
    SeriesStore store_;
    t::SyntheticSpec spec_;

private slots:
    void init() { QVERIFY(store_.append(store_.reset(t::synthetic_meta(spec_)), t::synthetic_batch(spec_))); }

    void emaBySpan() {
        // span 3: alpha 0.5; a NaN step keeps the average and stays NaN.
        const std::vector<double> s = ema({1, 2, NAN, 4}, 3);
        QCOMPARE(s[0], 1.0);
        QCOMPARE(s[1], 1.5);
        QVERIFY(std::isnan(s[2]));
        QCOMPARE(s[3], 2.75);
        QCOMPARE(ema({3, 5}, 1)[1], 5.0);  // span 1: the series itself
        QVERIFY(ema({}, 5).empty());
    }

    // Final loss (step 49) and eval loss (step 40) per run, relative to the baseline.
    void lossSummary() {
        LossSummaryModel m(&store_);
        QAbstractItemModelTester tester(&m, QAbstractItemModelTester::FailureReportingMode::QtTest);
        m.refresh();
        QCOMPARE(m.rowCount(), 3);
        for (int r = 0; r < 3; ++r) {
            QCOMPARE(m.value(r, LossSummaryModel::LastStep), 49.0);
            QCOMPARE(m.value(r, LossSummaryModel::Loss), t::loss_of(r, 49));
            QCOMPARE(m.value(r, LossSummaryModel::EvalLoss), t::eval_loss_of(r, 40));
        }
        QVERIFY(std::isnan(m.value(0, LossSummaryModel::LossVsBaseline)));  // the baseline itself
        QCOMPARE(m.value(2, LossSummaryModel::LossVsBaseline), 100.0 * (t::loss_of(2, 49) - t::loss_of(0, 49)) / t::loss_of(0, 49));
        QCOMPARE(m.value(1, LossSummaryModel::EvalVsBaseline),
                 100.0 * (t::eval_loss_of(1, 40) - t::eval_loss_of(0, 40)) / t::eval_loss_of(0, 40));
        // (4.56 - 4.51) / 4.51 = +1.11%
        QCOMPARE(m.data(m.index(1, LossSummaryModel::LossVsBaseline), Qt::DisplayRole).toString(), QString("+1.11%"));
        const QStringList csv = table_csv(m).split('\n');
        QCOMPARE(csv[0], QString("run,last step,loss,loss vs baseline,eval loss,eval vs baseline"));
        QVERIFY(csv[2].startsWith(QString::fromUtf8("delayed \u2192 current @ step 20,49,4.5")));  // switched at 20
        QVERIFY(std::isnan(relative_pct(1, 0)));
    }

    void lossSummaryOfNothing() {
        SeriesStore empty;
        LossSummaryModel m(&empty);
        m.refresh();
        QCOMPARE(m.rowCount(), 0);
        QCOMPARE(baseline_run(trace::TraceMeta{}), -1);
    }

    // The baseline is the run whose recipe quantizes nothing, whatever it is called: the
    // trace says which (a recipe this build may not know), else core's recipe table does.
    void baselineIsTheRunThatQuantizesNothing() {
        trace::TraceMeta m;
        m.runs = {{"fp8", "delayed"}, {"reference", "fp32_reference"}, {"mx", "mxfp8"}};
        m.baseline_run = 1;
        QCOMPARE(baseline_run(m), 1);
        m.baseline_run = trace::TraceMeta::kNotRecorded;  // a trace from before it was recorded
        QCOMPARE(baseline_run(m), 0);                       // no known unquantized recipe: run 0
        m.runs[2] = {"mx#2", "baseline"};
        QCOMPARE(baseline_run(m), 2);
        m.baseline_run = -1;  // recorded: none quantizes nothing
        QCOMPARE(baseline_run(m), 0);
        m.baseline_run = 7;   // out of range (a damaged attribute): as none
        QCOMPARE(baseline_run(m), 0);
    }

    // Run 1 at cursor 37 (capture 30), wgrad dy: SQNR minus current_e4m3's on each layer.
    void errorDifferenceToReference() {
        RecipeErrorModel m(&store_);
        QAbstractItemModelTester tester(&m, QAbstractItemModelTester::FailureReportingMode::QtTest);
        m.refresh(1, 37, Gemm::Wgrad, Operand::DY, ErrorStat::SqnrDb);
        QCOMPARE(RecipeErrorModel::defaultReference(m.recipeNames()), 0);
        QCOMPARE(RecipeErrorModel::defaultReference({"block1x128_fp32", "current_e5m2", "current_e4m3"}), 2);
        QCOMPARE(RecipeErrorModel::defaultReference({"block1x128_fp32"}), -1);
        m.setReference(0);
        const int slot = trace::operand_slot(2, Gemm::Wgrad, Operand::DY);
        // sqnr_of = 30 + 2 recipe - 0.1 slot + 0.01 step + run: the difference is 2 recipe.
        for (int r = 0; r < 4; ++r) {
            QCOMPARE(m.rawValue(2, r), t::sqnr_of(1, 30, slot, r));
            QVERIFY(std::abs(m.value(2, r) - 2.0 * r) < 1e-9);
        }
        QCOMPARE(m.value(2, 0), 0.0);
        QCOMPARE(m.headerData(4, Qt::Horizontal, Qt::DisplayRole).toString(), QString("mxfp8_e4m3 - current_e4m3"));
        QCOMPARE(m.recipeInUse(0), 1);  // run 1 trains with block1x128
        m.setReference(-1);
        QCOMPARE(m.value(2, 3), t::sqnr_of(1, 30, slot, 3));
        // The baseline trains unquantized: no recipe in use.
        m.refresh(0, 37, Gemm::Wgrad, Operand::DY, ErrorStat::SqnrDb);
        QCOMPARE(m.recipeInUse(0), -1);
        QCOMPARE(m.recipeInUse(99), -1);
    }

    void eventsNameTheirRun() {
        TraceBatch b;
        b.events.push_back({-1, 45, trace::EventKind::Pause, ""});
        QVERIFY(store_.append(store_.generation(), std::move(b)));
        EventsModel m(&store_);
        m.refresh();
        QStringList runs;
        for (int r = 0; r < m.rowCount(); ++r) runs << m.data(m.index(r, EventsModel::Run), Qt::DisplayRole).toString();
        QVERIFY2(runs.contains("all runs") && runs.contains(QString::fromUtf8("delayed \u2192 current @ step 20")) &&
                     !runs.join(' ').contains("#"),
                 qPrintable(runs.join(", ")));
    }

    // The baseline (run 0) shows the what-if recipe's figures, greyed; underflow above
    // the threshold is flagged.
    void layersWhatIfAndCues() {
        LayersModel m(&store_);
        QAbstractItemModelTester tester(&m, QAbstractItemModelTester::FailureReportingMode::QtTest);
        m.refresh(0, 37);
        QVERIFY(std::isnan(m.data(m.index(0, LayersModel::SqnrDb), kValueRole).toDouble()));
        m.refresh(0, 37, 3);  // mxfp8_e4m3: underflow 0.5 x 3 = 1.5%
        const int slot = m.operandAt(0).slot();
        QCOMPARE(m.data(m.index(0, LayersModel::SqnrDb), kValueRole).toDouble(), t::sqnr_of(0, 30, slot, 3));
        QCOMPARE(m.data(m.index(0, LayersModel::Recipe), Qt::DisplayRole).toString(), QString("what-if: mxfp8_e4m3"));
        QCOMPARE(m.data(m.index(0, LayersModel::UnderflowPct), kValueRole).toDouble(), 1.5);
        QVERIFY(m.data(m.index(0, LayersModel::UnderflowPct), Qt::BackgroundRole).isValid());
        QVERIFY(!m.data(m.index(0, LayersModel::SqnrDb), Qt::BackgroundRole).isValid());
        QVERIFY(m.data(m.index(0, LayersModel::SqnrDb), Qt::ForegroundRole).isValid());
        // A run with a recipe in use keeps its own figures (block1x128: underflow 0.5%).
        m.refresh(1, 37, 3);
        QCOMPARE(m.data(m.index(0, LayersModel::UnderflowPct), kValueRole).toDouble(), 0.5);
        QVERIFY(!m.data(m.index(0, LayersModel::UnderflowPct), Qt::BackgroundRole).isValid());
        QVERIFY(LayersModel::isBad(LayersModel::SqnrDb, LayersModel::kLowSqnrDb - 0.1));
        QVERIFY(LayersModel::isBad(LayersModel::OverflowPct, 0.01));
        QVERIFY(!LayersModel::isBad(LayersModel::OverflowPct, 0.0));
        QVERIFY(!LayersModel::isBad(LayersModel::SqnrDb, NAN));
        // One row per operand slot: no duplicates.
        QSet<int> seen;
        for (int r = 0; r < m.rowCount(); ++r) seen.insert(m.operandAt(r).slot());
        QCOMPARE(seen.size(), m.rowCount());
    }

    // Linear 0's w read by fprop and dgrad with the same figures: one row for both.
    void layersMergeSharedTensors() {
        TraceBatch b = t::synthetic_batch(spec_);
        t::share_tensor(b, 0, Operand::W, Gemm::Fprop, Gemm::Dgrad, [](trace::OperandRecord&) {});
        QVERIFY(store_.append(store_.reset(t::synthetic_meta(spec_)), std::move(b)));
        LayersModel m(&store_);
        QAbstractItemModelTester tester(&m, QAbstractItemModelTester::FailureReportingMode::QtTest);
        m.refresh(1, 37);
        QCOMPARE(m.rowCount(), spec_.linears * 6 - 1);
        const int row = m.rowOf({0, Gemm::Fprop, Operand::W});
        QCOMPARE(m.rowOf({0, Gemm::Dgrad, Operand::W}), row);
        QCOMPARE(m.data(m.index(row, LayersModel::GemmCol), Qt::DisplayRole).toString(), QString("fprop+dgrad"));
        QVERIFY(m.rowOf({0, Gemm::Wgrad, Operand::DY}) != m.rowOf({0, Gemm::Dgrad, Operand::DY}));
    }

    void nearestRank() {
        std::vector<double> v{5, 1, 4, 2, 3};
        QCOMPARE(nearest_rank(v, 0.5), 3.0);
        QCOMPARE(nearest_rank(v, 0.95), 5.0);
        QCOMPARE(nearest_rank(v, 0.0), 1.0);
        std::vector<double> none;
        QVERIFY(std::isnan(nearest_rank(none, 0.5)));
    }

    // Run 1 over 50 steps: op k runs once per step, 1000 (k + 1) + 10 ns each.
    void kernelStatsOverTheRun() {
        KernelStatsModel m(&store_);
        QAbstractItemModelTester tester(&m, QAbstractItemModelTester::FailureReportingMode::QtTest);
        m.refresh(1, 37, KernelStatsModel::WholeRun);
        QCOMPARE(m.steps(), 50);
        QCOMPARE(m.rowCount(), 6);
        // Sorted by total time: op 5 (6010 ns) first.
        QCOMPARE(m.data(m.index(0, KernelStatsModel::Name), Qt::DisplayRole).toString(), QString("layernorm"));
        QCOMPARE(m.value(0, KernelStatsModel::Calls), 50.0);
        QCOMPARE(m.value(0, KernelStatsModel::TotalMs), 50 * 6010 * 1e-6);
        QCOMPARE(m.value(0, KernelStatsModel::MedianUs), 6.01);
        QCOMPARE(m.value(0, KernelStatsModel::P95Us), 6.01);
        QCOMPARE(m.value(0, KernelStatsModel::MaxUs), 6.01);
        double step_s = 0;
        for (int s = 0; s < 50; ++s) step_s += t::step_time_of(1, s);
        QVERIFY(std::abs(m.stepSeconds() - step_s) < 1e-12);
        m.refresh(1, 37, KernelStatsModel::CursorStep);
        QCOMPARE(m.steps(), 1);
        QCOMPARE(m.value(0, KernelStatsModel::Calls), 1.0);
        m.refresh(7, 37, KernelStatsModel::WholeRun);  // no such run
        QCOMPARE(m.rowCount(), 0);
    }

    // The default launch (200 steps, capture every 10) gets block maps every 20 steps, so
    // a run has maps past its first step; a short run gets one every capture.
    void launchTakesBlockMaps() {
        LaunchSpec s;
        QCOMPARE(s.blockMapInterval(), 20);
        QStringList a = s.arguments();
        QCOMPARE(a[a.indexOf("--blockmap-every") + 1], QString("20"));
        s.steps = 12;
        s.capture_every = 3;
        QCOMPARE(s.blockMapInterval(), 3);
        s.blockmap_every = 6;
        QCOMPARE(s.blockMapInterval(), 6);
        s.capture_every = 0;
        QCOMPARE(s.blockMapInterval(), 0);
    }
};

QTEST_GUILESS_MAIN(GlanceModelsTest)
#include "test_glance_models.moc"
