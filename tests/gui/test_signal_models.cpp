// Signals the views give that must not mislead, checked without widgets: overflow only
// where the cast saturates, delayed what-ifs without history marked not applicable, both
// GEMMs' uses of a tensor kept apart where any quantizer sees them differently, a run
// named after its recipe switches, and one direction of good and bad per statistic.
#include <QAbstractItemModelTester>
#include <QTest>
#include <cmath>

#include "fp8/scaling.h"
#include "models/display_names.h"
#include "models/goodness.h"
#include "models/layers_model.h"
#include "models/model_roles.h"
#include "models/quantizer_facts.h"
#include "models/recipe_error_model.h"
#include "synthetic_trace.h"

using namespace fp8scope;
using namespace fp8scope::views;
namespace t = fp8scope::testing;

namespace {
// A delayed what-if without history: scale 1 on values near 1e-3, all of them flushed.
constexpr double kNoHistorySqnr = -31.0, kNoHistoryUnderflow = 100.0;
}  // namespace

class SignalModelsTest : public QObject {
    Q_OBJECT
    SeriesStore store_;
    t::SyntheticSpec spec_;

private slots:
    void init() { QVERIFY(store_.append(store_.reset(t::synthetic_meta(spec_)), t::synthetic_batch(spec_))); }

    // E4M3's largest value is 448 and the next step of its grid would be 480: a product
    // up to 464 rounds (ties to even) back to 448 and saturates nothing. E5M2: 57344,
    // then 65536 (past its range); half way, 61440, rounds to the even 65536.
    void saturationIsWhatTheCastRoundsPastMax() {
        QVERIFY(!cast_saturates(464.0f, 1.0f, Format::E4M3));
        QVERIFY(cast_saturates(std::nextafter(464.0f, 1e9f), 1.0f, Format::E4M3));
        QVERIFY(!cast_saturates(std::nextafter(61440.0f, 0.0f), 1.0f, Format::E5M2));
        QVERIFY(cast_saturates(61440.0f, 1.0f, Format::E5M2));
        QVERIFY(cast_saturates(232.5f, 2.0f, Format::E4M3));  // 465
        QVERIFY(cast_saturates(1e30f, 1e30f, Format::E4M3));  // past float32: Inf
        QVERIFY(!cast_saturates(1.0f, NAN, Format::E4M3));    // block quantizers, baseline
        QVERIFY(!cast_saturates(NAN, 1.0f, Format::E4M3));
        // Current scaling: s = 448 / amax in float32, so amax * s lands on 448 up to
        // rounding, above it for many amaxes (448.00003 for these). Never a saturation.
        int above = 0;
        for (float amax = 0.5f; amax < 8.0f; amax *= 1.0007f) {
            const float s = compute_scale(amax, Format::E4M3, 0.0f, false);
            above += amax * s > 448.0f;
            QVERIFY(!cast_saturates(amax, s, Format::E4M3));
            QVERIFY(!cast_saturates(amax, compute_scale(amax, Format::E5M2, 0.0f, false), Format::E5M2));
        }
        QVERIFY2(above > 100, qPrintable(QString::number(above)));  // the old strict test flagged these
        QCOMPARE(quantizer_format("current_e5m2"), Format::E5M2);
        QCOMPARE(quantizer_format("mxfp8_e4m3_rceil"), Format::E4M3);
        QCOMPARE(quantizer_format("not a quantizer"), Format::E4M3);
    }

    // Quantizer 4 is delayed_e4m3 with a first step's figures. Run 1 trains with
    // block1x128 (1): the delayed column is not applicable there; a layer that trains
    // with it has its figures.
    void delayedWhatIfWithoutHistoryDoesNotApply() {
        QVERIFY(!what_if_applies("delayed_e4m3", false));
        QVERIFY(!what_if_applies("delayed_e5m2:history=16", false));
        QVERIFY(what_if_applies("delayed_e4m3", true));
        QVERIFY(what_if_applies("current_e4m3", false));
        QVERIFY(what_if_applies("mxfp8_e4m3_rceil", false));
        trace::TraceMeta meta = t::synthetic_meta(spec_);
        meta.quantizers.push_back("delayed_e4m3");
        TraceBatch b = t::synthetic_batch(spec_);
        for (trace::OperandRecord& o : b.operands) {
            ErrorStats e;
            e.sqnr_db = kNoHistorySqnr;
            e.underflow_pct = kNoHistoryUnderflow;
            o.errors.push_back(e);
            if (o.key.linear == 3) o.quantizer_in_use = 4;  // trains delayed: its own history
        }
        QVERIFY(store_.append(store_.reset(meta), std::move(b)));
        RecipeErrorModel m(&store_);
        QAbstractItemModelTester tester(&m, QAbstractItemModelTester::FailureReportingMode::QtTest);
        m.refresh(1, 37, Gemm::Fprop, Operand::X, ErrorStat::SqnrDb);
        QCOMPARE(m.recipeCount(), 5);
        m.setReference(0);
        for (int l = 0; l < 3; ++l) {
            QVERIFY(!m.applies(l, 4));
            QVERIFY(std::isnan(m.value(l, 4)));
            QVERIFY(std::isnan(m.rawValue(l, 4)));
            QCOMPARE(m.data(m.index(l, 5), Qt::DisplayRole).toString(), QString("n/a"));
            QVERIFY(std::isnan(m.data(m.index(l, 5), kValueRole).toDouble()));
            QVERIFY(m.data(m.index(l, 5), Qt::ToolTipRole).toString().contains("not applicable"));
            QVERIFY(m.voidReason(l, 4).contains("delayed_e4m3"));
            for (int r = 0; r < 4; ++r) QVERIFY(m.applies(l, r) && m.voidReason(l, r).isEmpty());
            const int slot = trace::operand_slot(l, Gemm::Fprop, Operand::X);
            QVERIFY(std::abs(m.value(l, 3) - (t::sqnr_of(1, 30, slot, 3) - t::sqnr_of(1, 30, slot, 0))) < 1e-9);
        }
        QVERIFY(m.applies(3, 4));
        QCOMPARE(m.rawValue(3, 4), kNoHistorySqnr);
        QCOMPARE(m.recipeInUse(3), 4);
        m.refresh(1, 37, Gemm::Fprop, Operand::X, ErrorStat::UnderflowPct);
        QVERIFY(std::isnan(m.rawValue(0, 4)));
        QCOMPARE(m.rawValue(3, 4), kNoHistoryUnderflow);
        // The baseline's what-if in the layers table: none under delayed_e4m3.
        LayersModel layers(&store_);
        layers.refresh(0, 37, 4);
        QCOMPARE(layers.data(layers.index(0, LayersModel::Recipe), Qt::DisplayRole).toString(),
                 QString("what-if: delayed_e4m3 (n/a)"));
        QVERIFY(std::isnan(layers.data(layers.index(0, LayersModel::SqnrDb), kValueRole).toDouble()));
        QVERIFY(std::isnan(layers.data(layers.index(0, LayersModel::UnderflowPct), kValueRole).toDouble()));
        layers.refresh(0, 37, 3);
        QCOMPARE(layers.data(layers.index(0, LayersModel::SqnrDb), kValueRole).toDouble(),
                 t::sqnr_of(0, 30, layers.operandAt(0).slot(), 3));
    }

    // A per-tensor run (current_e4m3 in use) casts dy once for dgrad and wgrad: the same
    // figures under the quantizer in use, but 1x128 blocks (quantizer 1) run along dy's
    // rows for dgrad and its columns for wgrad, where 55% of it underflows. Two rows,
    // and the wgrad side reaches the error table.
    void gemmsOfOneTensorStayApartWhereTheyDiffer() {
        TraceBatch b = t::synthetic_batch(spec_);
        for (trace::OperandRecord& o : b.operands)
            if (o.key.linear == 0 && o.key.operand == Operand::DY) o.quantizer_in_use = 0;
        t::share_tensor(b, 0, Operand::DY, Gemm::Dgrad, Gemm::Wgrad, [](trace::OperandRecord& o) { o.errors[1].underflow_pct = 55.0; });
        QVERIFY(store_.append(store_.reset(t::synthetic_meta(spec_)), std::move(b)));
        LayersModel m(&store_);
        QAbstractItemModelTester tester(&m, QAbstractItemModelTester::FailureReportingMode::QtTest);
        m.refresh(1, 37);
        QCOMPARE(m.rowCount(), spec_.linears * 6);
        const int drow = m.rowOf({0, Gemm::Dgrad, Operand::DY}), wrow = m.rowOf({0, Gemm::Wgrad, Operand::DY});
        QVERIFY(drow >= 0 && wrow >= 0 && drow != wrow);
        QCOMPARE(m.data(m.index(wrow, LayersModel::GemmCol), Qt::DisplayRole).toString(), QString("wgrad"));
        QCOMPARE(m.operandAt(wrow), (OperandRef{0, Gemm::Wgrad, Operand::DY}));
        QVERIFY(m.data(m.index(wrow, LayersModel::GemmCol), Qt::ToolTipRole).toString().contains("as dgrad does"));
        QCOMPARE(m.data(m.index(m.rowOf({0, Gemm::Fprop, Operand::X}), LayersModel::GemmCol), Qt::ToolTipRole).toString(),
                 QString("fprop"));  // its wgrad row differs in the synthetic trace's figures
        RecipeErrorModel e(&store_);
        e.refresh(1, 37, Gemm::Wgrad, Operand::DY, ErrorStat::UnderflowPct);
        QCOMPARE(e.rawValue(0, 1), 55.0);
        e.refresh(1, 37, Gemm::Dgrad, Operand::DY, ErrorStat::UnderflowPct);
        QCOMPARE(e.rawValue(0, 1), 0.5);
        // The same figures under every quantizer: one row.
        TraceBatch same = t::synthetic_batch(spec_);
        for (trace::OperandRecord& o : same.operands)
            if (o.key.linear == 0 && o.key.operand == Operand::DY) o.quantizer_in_use = 0;
        t::share_tensor(same, 0, Operand::DY, Gemm::Dgrad, Gemm::Wgrad, [](trace::OperandRecord&) {});
        QVERIFY(store_.append(store_.reset(t::synthetic_meta(spec_)), std::move(same)));
        m.refresh(1, 37);
        QCOMPARE(m.rowCount(), spec_.linears * 6 - 1);
        QCOMPARE(m.rowOf({0, Gemm::Wgrad, Operand::DY}), m.rowOf({0, Gemm::Dgrad, Operand::DY}));
    }

    // The trainer's switch event (detail "from -> to") renames the run wherever runs
    // are named; the run keeps the name it started with in its info. The synthetic trace
    // switches run 1 from delayed to current at step 20.
    void runIsNamedAfterItsRecipeSwitches() {
        auto names = [this] {
            return store_.read([](const TraceData& d) {
                QStringList n;
                for (int r = 0; r < static_cast<int>(d.runs.size()); ++r) n << run_label(d.meta, r);
                return n;
            });
        };
        QCOMPARE(names(), (QStringList{"baseline", QString::fromUtf8("delayed \u2192 current @ step 20"), "blockwise"}));
        QCOMPARE(store_.read([](const TraceData& d) { return d.runs[1].info.name; }), std::string("delayed"));
        // A later switch adds its link; another run's switch renames that run alone.
        TraceBatch later;
        later.events.push_back({1, 40, trace::EventKind::RecipeSwitch, "current -> mxfp8"});
        later.events.push_back({2, 35, trace::EventKind::RecipeSwitch, "blockwise -> mxfp8"});
        later.events.push_back({-1, 45, trace::EventKind::Pause, ""});
        QVERIFY(store_.append(store_.generation(), std::move(later)));
        QCOMPARE(names(), (QStringList{"baseline", QString::fromUtf8("delayed \u2192 current @ step 20 \u2192 mxfp8 @ step 40"),
                                       QString::fromUtf8("blockwise \u2192 mxfp8 @ step 35")}));
        // A new trace starts from its own names.
        QVERIFY(store_.append(store_.reset(t::synthetic_meta(spec_)), TraceBatch{}));
        QCOMPARE(names()[1], QString("delayed"));
    }

    // Higher is better for SQNR and cosine only; the layers table flags bad cells in the
    // goodness scale's bad tint, red side.
    void everyStatisticSaysWhichWayIsGood() {
        QCOMPARE(better_of(ErrorStat::SqnrDb), Better::Higher);
        QCOMPARE(better_of(ErrorStat::Cosine), Better::Higher);
        for (ErrorStat s : {ErrorStat::Mse, ErrorStat::UnderflowPct, ErrorStat::OverflowPct, ErrorStat::RelL2,
                            ErrorStat::MaxAbsErr})
            QCOMPARE(better_of(s), Better::Lower);
        const QColor bad = bad_cell_color();
        QVERIFY(bad.red() > bad.blue());
        LayersModel m(&store_);
        m.refresh(0, 37, 3);  // mxfp8_e4m3 what-if: underflow 1.5%, bad
        QCOMPARE(m.data(m.index(0, LayersModel::UnderflowPct), Qt::BackgroundRole).value<QColor>(), bad);
    }
};

QTEST_GUILESS_MAIN(SignalModelsTest)
#include "test_signal_models.moc"
