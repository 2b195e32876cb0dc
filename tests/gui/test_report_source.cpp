// An `analyze` report opened like a trace: one run named by the file, one linear per
// tensor, and at step 0 each tensor as its linear's fprop x with every recipe's error.
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>

#include "models/report_trace.h"
#include "models/trace_file_loader.h"

using namespace fp8scope;
using namespace fp8scope::views;

class ReportSourceTest : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;

    static TensorAnalysis tensor(const std::string& name, double amax, const std::vector<std::string>& recipes) {
        TensorAnalysis t;
        t.name = name;
        t.shape = {8, 16, 64};
        t.analysis.tensor.amax = amax;
        t.analysis.tensor.outliers.kurtosis = 2 * amax;
        t.analysis.tensor.histogram.bins[3 - kHistMinExp] = 42;
        t.analysis.tensor.outliers.channel_absmax.assign(64, float(amax));
        for (std::size_t r = 0; r < recipes.size(); ++r) {
            ErrorStats e;
            e.recipe = recipes[r];
            e.sqnr_db = 20.0 + r + amax;
            t.analysis.errors.push_back(e);
        }
        return t;
    }

private slots:
    void aReportIsATraceOfOneStep() {
        const std::vector<std::string> recipes{"current_e4m3", "block1x128_e4m3_pow2"};
        const QString path = dir_.filePath("report.h5");
        write_analysis_report(path.toStdString(), "test", recipes,
                              {tensor("blocks.0.attn.qkv.weight", 2.0, recipes), tensor("act", 7.0, recipes)});
        SeriesStore store;
        TraceFileLoader loader(&store);
        QSignalSpy finished(&loader, &TraceFileLoader::finished), failed(&loader, &TraceFileLoader::failed);
        loader.open(path);
        QVERIFY(loader.wait(30000));
        QCoreApplication::processEvents();
        QCOMPARE(failed.count(), 0);
        QCOMPARE(finished.count(), 1);
        store.read([&](const TraceData& d) {
            QCOMPARE(d.runs.size(), std::size_t(1));
            QCOMPARE(d.runs[0].info.name, std::string("report.h5"));
            QCOMPARE(d.meta.quantizers, recipes);
            QCOMPARE(d.meta.linears.size(), std::size_t(2));
            QCOMPARE(d.meta.linears[1].name, std::string("act"));
            QCOMPARE(d.meta.linears[1].in_features, 64);
            QCOMPARE(d.meta.linears[1].out_features, 128);  // 8 x 16 rows
            QCOMPARE(d.first_step, 0);
            QCOMPARE(d.last_step, 0);
            QCOMPARE(d.runs[0].capture_steps, std::vector<std::int64_t>{0});
            const auto* o = d.runs[0].operand_at(0, {1, Gemm::Fprop, Operand::X});
            QVERIFY(o);
            QCOMPARE(o->figures[&TensorStats::amax], 7.0);
            QCOMPARE(o->figures[&OutlierSummary::kurtosis], 14.0);
            QCOMPARE(o->histogram().count(3), 42);
            QCOMPARE(o->recipe_in_use, -1);
            QCOMPARE(o->errors().size(), std::size_t(2));
            QCOMPARE(o->errors()[1][&ErrorStats::sqnr_db], 28.0);
            QCOMPARE(o->channel_absmax().size(), std::size_t(64));
            QVERIFY(!d.runs[0].operand_at(0, {1, Gemm::Fprop, Operand::W}));  // only x
        });
    }
};

QTEST_GUILESS_MAIN(ReportSourceTest)
#include "test_report_source.moc"
