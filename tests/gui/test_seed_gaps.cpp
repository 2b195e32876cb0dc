// The Loss view on a comparison trained with several seeds: the seed-gap model's band and
// verdict against figures worked out here (mean, sample sd, t_{0.975,2} = 4.30265), the
// band drawn as a translucent fill between the interval's graphs, each run's summary
// relative to the baseline of its own seed, and a trace of one seed without any of it.
#include <QTableView>
#include <QTest>
#include <cmath>

#include "models/seed_gap_model.h"
#include "qcustomplot.h"
#include "show_view.h"
#include "synthetic_trace.h"
#include "widgets/loss_view.h"

using namespace fp8scope;
using namespace fp8scope::views;
namespace t = fp8scope::testing;

namespace {

// Seeds 3, 4, 5 of baseline and mxfp8, steps 0..20, evaluated at 10 and 20. Seed k's
// baseline eval loss is 4 + 0.01 k; mxfp8's gap to it is noise at step 10 (+0.01, -0.01,
// 0) and clear at step 20 (+0.010, +0.012, +0.014).
const double kGap10[3] = {0.01, -0.01, 0.0}, kGap20[3] = {0.010, 0.012, 0.014};
const double kT = 4.30265272974946;

double base_eval(int k) { return 4 + 0.01 * k; }

trace::TraceMeta seeded_meta() {
    trace::TraceMeta m;
    m.tool_version = "test";
    m.config_json = R"({"compare": ["baseline", "mxfp8"], "seed": 3, "seeds": 3})";
    for (const char* r : {"baseline", "mxfp8"})
        for (int s = 3; s <= 5; ++s) m.runs.push_back({std::string(r) + " s" + std::to_string(s), r});
    m.training_recipes = {"baseline", "mxfp8"};
    return m;
}

TraceBatch seeded_batch() {
    TraceBatch b;
    for (int run = 0; run < 6; ++run) {
        const int k = run % 3;
        for (std::int64_t step = 0; step <= 20; ++step) {
            double eval = NAN;
            if (step == 10 || step == 20)
                eval = base_eval(k) + (run < 3 ? 0.0 : step == 10 ? kGap10[k] : kGap20[k]);
            b.steps.push_back({run, step, 5.0 - 0.1 * step + 0.02 * k + (run < 3 ? 0 : 0.005), eval, 1e-3, 1.0, 1.0,
                               1000.0, run / 3});
        }
    }
    return b;
}

}  // namespace

class SeedGapsTest : public QObject {
    Q_OBJECT
    SeriesStore store_;
    StepCursor cursor_;
    Selection selection_;
    std::unique_ptr<ViewSet> set_;

private slots:
    void init() { QVERIFY(store_.append(store_.reset(seeded_meta()), seeded_batch())); }
    void cleanup() {
        if (set_) t::close_view_set(set_);
    }

    void modelGivesTheBandAndTheVerdict() {
        SeedGapModel m(&store_);
        m.refresh();
        QVERIFY(m.gaps().has_value());
        QCOMPARE(m.rowCount(), 1);  // mxfp8; the baseline has no row
        QCOMPARE(m.data(m.index(0, SeedGapModel::Recipe), Qt::DisplayRole).toString(), QString("mxfp8"));
        const stats::SeedComparison& c = m.gaps()->comparison;
        QCOMPARE(c.series, stats::GapSeries::EvalLoss);
        const stats::GapCurve& band = c.gap[1];
        QCOMPARE(band.step, (std::vector<double>{10, 20}));
        // Step 10: mean 0, sd 0.01; step 20: mean 0.012, sd 0.002.
        QVERIFY(std::abs(band.at[0].mean) < 1e-12);
        QVERIFY(std::abs(band.at[0].hi() - kT * 0.01 / std::sqrt(3.0)) < 1e-9);
        QVERIFY(std::abs(band.at[1].mean - 0.012) < 1e-12);
        QVERIFY(std::abs(band.at[1].lo() - (0.012 - kT * 0.002 / std::sqrt(3.0))) < 1e-9);
        QVERIFY(std::abs(m.value(0, SeedGapModel::MeanGap) - 0.012) < 1e-12);
        QVERIFY(std::abs(m.value(0, SeedGapModel::GapPct) - 100 * 0.012 / base_eval(1)) < 1e-9);
        QCOMPARE(m.value(0, SeedGapModel::Significant), 1.0);
        QCOMPARE(m.value(0, SeedGapModel::LeavesBand), 20.0);  // step 10 was noise
        QCOMPARE(m.data(m.index(0, SeedGapModel::Significant), Qt::DisplayRole).toString(), QString("yes"));
    }

    void viewDrawsTheBandsAndTheTable() {
        set_ = t::open_view_set(store_, cursor_, selection_);
        auto* v = t::show_view<LossView>(*set_, "loss", {1000, 700}, "seeds_");
        const QList<QCPGraph*> g = v->diffRect()->graphs();
        QCOMPARE(g.size(), 1 + LossView::BandGraphsPerRecipe);  // the zero line, mxfp8's band
        QCPGraph* low = g[1 + LossView::BandLow];
        QCPGraph* high = g[1 + LossView::BandHigh];
        QCPGraph* mean = g[1 + LossView::BandMean];
        QCOMPARE(high->channelFillGraph(), low);
        QVERIFY(high->brush().style() != Qt::NoBrush);
        QVERIFY(high->brush().color().alpha() < 255);  // translucent
        QCOMPARE(high->brush().color().rgb(), mean->pen().color().rgb());  // the recipe's colour
        QCOMPARE(mean->data()->size(), 2);
        QVERIFY(std::abs(mean->data()->at(1)->value - 0.012) < 1e-12);
        QVERIFY(std::abs(high->data()->at(1)->value - (0.012 + kT * 0.002 / std::sqrt(3.0))) < 1e-9);
        QVERIFY(!v->seedTable()->isHidden());
        QCOMPARE(v->seedTable()->model()->rowCount(), 1);
        // Each run's eval loss against the baseline of its seed: mxfp8 s4 vs baseline s4.
        QVERIFY(std::abs(v->summary().value(4, LossSummaryModel::EvalVsBaseline) - 100 * kGap20[1] / base_eval(1)) <
                1e-9);
    }

    void oneSeedHasNoBands() {
        t::SyntheticSpec spec;
        QVERIFY(store_.append(store_.reset(t::synthetic_meta(spec)), t::synthetic_batch(spec)));
        set_ = t::open_view_set(store_, cursor_, selection_);
        auto* v = t::show_view<LossView>(*set_, "loss", {1000, 700}, "seeds_one_");
        QVERIFY(!v->seedGaps().gaps());
        QVERIFY(v->seedTable()->isHidden());
        QCOMPARE(v->diffRect()->graphs().size(), (spec.runs - 1) * LossView::DiffGraphsPerRun);
    }
};

QTEST_MAIN(SeedGapsTest)
#include "test_seed_gaps.moc"
