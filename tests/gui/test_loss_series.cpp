// The Loss view's derived series, without widgets: the difference to the baseline run at
// the steps both have, its EMA, the eval-loss difference and the evaluated steps alone,
// against numbers worked out by hand.
#include <QTest>
#include <cmath>

#include "models/loss_series.h"

using namespace fp8scope;
using namespace fp8scope::views;

namespace {

// A run's step columns from (step, loss, eval loss, step time) rows.
StepColumns columns(std::initializer_list<std::array<double, 4>> rows) {
    StepColumns c;
    for (const auto& [step, loss, eval, time] : rows)
        c.push_back({.step = std::int64_t(step), .loss = loss, .eval_loss = eval, .step_ms = time});
    return c;
}

const StepColumns kRun = columns({{1, 4.0, NAN, 0.5},
                                  {2, 3.5, 3.625, 0.25},
                                  {3, NAN, NAN, 0.125},  // no loss: no difference here
                                  {4, 3.0, NAN, NAN},    // the baseline has no step 4
                                  {5, 2.75, 2.875, 2.0}});
const StepColumns kBaseline = columns({{1, 4.0, NAN, 0.5},
                                       {2, 3.25, 3.5, 0.5},
                                       {3, 3.0, NAN, 0.5},
                                       {5, 2.5, 2.5, 0.5},
                                       {6, 2.25, NAN, 0.5}});

}  // namespace

class LossSeriesTest : public QObject {
    Q_OBJECT
private slots:
    void differenceTakesTheStepsBothRunsHave() {
        const LossDifference d = loss_difference(kRun, kBaseline, 3);
        QCOMPARE(d.raw.step, (std::vector<double>{1, 2, 5}));
        QCOMPARE(d.raw.value, (std::vector<double>{0.0, 0.25, 0.25}));
        // Span 3: alpha 0.5. 0, then 0 + (0.25 - 0) / 2, then 0.125 + (0.25 - 0.125) / 2.
        QCOMPARE(d.smoothed.step, (std::vector<double>{1, 2, 5}));
        QCOMPARE(d.smoothed.value, (std::vector<double>{0.0, 0.125, 0.1875}));
        // Eval: 3.625 - 3.5 at step 2, 2.875 - 2.5 at step 5.
        QCOMPARE(d.eval.step, (std::vector<double>{2, 5}));
        QCOMPARE(d.eval.value, (std::vector<double>{0.125, 0.375}));
    }

    void spanOneIsTheRawDifference() {
        const LossDifference d = loss_difference(kRun, kBaseline, 1);
        QCOMPARE(d.smoothed.value, d.raw.value);
    }

    void againstItselfEverythingIsZero() {
        const LossDifference d = loss_difference(kBaseline, kBaseline, 5);
        QCOMPARE(d.raw.value, (std::vector<double>{0, 0, 0, 0, 0}));
        QCOMPARE(d.eval.value, (std::vector<double>{0, 0}));
    }

    void noCommonStepsNoPoints() {
        const StepColumns other = columns({{10, 1.0, 1.0, 0.5}, {11, 1.0, NAN, 0.5}});
        const LossDifference d = loss_difference(other, kBaseline, 3);
        QVERIFY(d.raw.step.empty() && d.smoothed.value.empty() && d.eval.step.empty());
    }

    void evalPointsAreTheEvaluatedSteps() {
        const StepSeries e = finite_points(kRun.step, kRun[&trace::StepRecord::eval_loss]);
        QCOMPARE(e.step, (std::vector<double>{2, 5}));
        QCOMPARE(e.value, (std::vector<double>{3.625, 2.875}));
    }

};

QTEST_GUILESS_MAIN(LossSeriesTest)
#include "test_loss_series.moc"
