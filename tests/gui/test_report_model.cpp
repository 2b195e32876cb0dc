// An `analyze` report shown as a report: tensor list, statistics and quantizer table of a
// report written by the report writer, compared to the figures the writer was given.
#include <QFont>
#include <QTemporaryDir>
#include <QTest>
#include <cmath>

#include "models/model_roles.h"
#include "models/report_model.h"

using namespace fp8scope;
using namespace fp8scope::views;

class ReportModelTest : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;
    const std::vector<std::string> quantizers_{"current_e4m3", "block1x128_e4m3_pow2", "mxfp8_e4m3"};

    static TensorAnalysis tensor(const std::string& name, std::vector<std::int64_t> shape, double amax,
                                 std::vector<double> sqnr) {
        TensorAnalysis t;
        t.file = "model.safetensors";
        t.name = name;
        t.dtype = "BF16";
        t.shape = shape;
        TensorStats& s = t.analysis.tensor;
        s.numel = 1;
        for (auto d : shape) s.numel *= d;
        s.finite = s.numel - 3;
        s.nan = 1;
        s.inf = 2;
        s.zero = 5;
        s.amax = amax;
        s.min_nonzero_abs = 1.0 / 1024;
        s.mean = 0.25;
        s.rms = 1.5;
        s.stddev = 1.25;
        s.dynamic_range = std::log2(amax * 1024);
        s.outliers.k = 6;
        s.outliers.kurtosis = 2 * amax;
        s.outliers.frac_beyond_k_rms = 0.001;
        s.outliers.channel_absmax.assign(shape.back(), float(amax));
        s.histogram.bins[-3 - kHistMinExp] = 40;
        s.histogram.bins[2 - kHistMinExp] = 7;
        const char* names[] = {"current_e4m3", "block1x128_e4m3_pow2", "mxfp8_e4m3"};
        for (std::size_t q = 0; q < sqnr.size(); ++q) {
            ErrorStats e;
            e.recipe = names[q];
            e.amax = amax;
            e.sqnr_db = sqnr[q];
            e.rel_l2 = 0.01 * (q + 1);
            e.max_abs_err = 0.5 * (q + 1);
            e.cosine = 0.999;
            e.underflow_pct = 1.5 + q;
            e.overflow_pct = 0.25 * q;
            e.nonfinite_out = std::int64_t(q);
            e.scale_inv_min = 0.125;
            e.scale_inv_max = 4.0;
            t.analysis.errors.push_back(e);
        }
        return t;
    }

    static double value(const QAbstractItemModel& m, int row, int column) {
        return m.index(row, column).data(kValueRole).toDouble();
    }
    static QString text(const QAbstractItemModel& m, int row, int column) {
        return m.index(row, column).data().toString();
    }

private slots:
    void tensorListStatisticsAndQuantizers() {
        const QString path = dir_.filePath("report.h5");
        // The second tensor's exact quantization (+Inf) is never the worst; NaN is skipped.
        write_analysis_report(path.toStdString(), "test", quantizers_,
                              {tensor("blocks.0.attn.qkv.weight", {8, 16, 64}, 2.0, {31.5, 24.25, 27.0}),
                               tensor("act", {128, 32}, 7.0, {INFINITY, NAN, 19.5})});
        ReportModel model;
        QString error;
        QVERIFY2(model.open(path, &error), qPrintable(error));
        QVERIFY(model.isOpen());

        const ReportTensorsModel& list = *model.tensors();
        QCOMPARE(list.rowCount(), 2);
        QCOMPARE(text(list, 0, ReportTensorsModel::Name), QString("blocks.0.attn.qkv.weight"));
        QCOMPARE(text(list, 0, ReportTensorsModel::Shape), QString("8 x 16 x 64"));
        QCOMPARE(text(list, 0, ReportTensorsModel::Dtype), QString("BF16"));
        QCOMPARE(text(list, 0, ReportTensorsModel::Numel), QString("8192"));
        QCOMPARE(value(list, 0, ReportTensorsModel::Amax), 2.0);
        QCOMPARE(value(list, 0, ReportTensorsModel::Kurtosis), 4.0);
        QCOMPARE(text(list, 0, ReportTensorsModel::Worst), QString("block1x128_e4m3_pow2"));
        QCOMPARE(value(list, 0, ReportTensorsModel::WorstSqnr), 24.25);
        QCOMPARE(text(list, 1, ReportTensorsModel::Shape), QString("128 x 32"));
        QCOMPARE(text(list, 1, ReportTensorsModel::Worst), QString("mxfp8_e4m3"));
        QCOMPARE(value(list, 1, ReportTensorsModel::WorstSqnr), 19.5);

        // The first tensor is current when the report opens.
        QCOMPARE(model.tensor(), 0);
        model.setTensor(1);
        QCOMPARE(model.tensor(), 1);
        const ReportStatsModel& stats = *model.stats();
        QCOMPARE(stats.rowCount(), 13);
        QCOMPARE(text(stats, 0, 0), QString("numel"));
        QCOMPARE(text(stats, 0, 1), QString("4096"));
        QCOMPARE(value(stats, 1, 1), 4093.0);  // finite
        QCOMPARE(value(stats, 2, 1), 1.0);     // NaN
        QCOMPARE(value(stats, 3, 1), 2.0);     // Inf
        QCOMPARE(value(stats, 4, 1), 5.0);     // zero
        QCOMPARE(value(stats, 5, 1), 7.0);     // amax
        QCOMPARE(value(stats, 6, 1), 1.0 / 1024);
        QCOMPARE(value(stats, 8, 1), 1.5);  // rms
        QCOMPARE(value(stats, 10, 1), std::log2(7.0 * 1024));
        QCOMPARE(value(stats, 11, 1), 14.0);  // kurtosis
        QCOMPARE(text(stats, 12, 0), QString("fraction beyond 6 rms"));
        QCOMPARE(value(stats, 12, 1), 0.001);

        const ReportQuantizersModel& q = *model.quantizers();
        QCOMPARE(q.rowCount(), 3);
        QCOMPARE(text(q, 2, ReportQuantizersModel::Quantizer), QString("mxfp8_e4m3"));
        QVERIFY(std::isinf(value(q, 0, ReportQuantizersModel::Sqnr)));
        QVERIFY(std::isnan(value(q, 1, ReportQuantizersModel::Sqnr)));
        QCOMPARE(value(q, 2, ReportQuantizersModel::Sqnr), 19.5);
        QCOMPARE(value(q, 2, ReportQuantizersModel::RelL2), 0.03);
        QCOMPARE(value(q, 2, ReportQuantizersModel::MaxAbsErr), 1.5);
        QCOMPARE(value(q, 2, ReportQuantizersModel::Underflow), 3.5);
        QCOMPARE(value(q, 2, ReportQuantizersModel::Overflow), 0.5);
        QCOMPARE(value(q, 2, ReportQuantizersModel::NonfiniteOut), 2.0);
        QCOMPARE(value(q, 2, ReportQuantizersModel::ScaleInvMax), 4.0);
        QVERIFY(q.index(2, 0).data(Qt::FontRole).value<QFont>().bold());  // the worst
        QVERIFY(!q.index(0, 0).data(Qt::FontRole).value<QFont>().bold());

        const auto hist = model.histogram();
        QCOMPARE(hist.size(), std::size_t(2));
        QCOMPARE(hist[0], std::make_pair(-3, std::int64_t(40)));
        QCOMPARE(hist[1], std::make_pair(2, std::int64_t(7)));
    }

    void aFileThatIsNoReportFailsAndKeepsTheShownReport() {
        const QString path = dir_.filePath("one.h5");
        write_analysis_report(path.toStdString(), "test", quantizers_, {tensor("w", {4, 32}, 3.0, {20, 21, 22})});
        ReportModel model;
        QString error;
        QVERIFY(model.open(path, &error));
        const QString junk = dir_.filePath("junk.h5");
        QFile f(junk);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write("not hdf5");
        f.close();
        QVERIFY(!model.open(junk, &error));
        QVERIFY(error.contains("junk.h5"));
        QCOMPARE(model.tensors()->rowCount(), 1);
        QCOMPARE(value(*model.tensors(), 0, ReportTensorsModel::Amax), 3.0);
    }
};

QTEST_MAIN(ReportModelTest)  // fonts need a QGuiApplication
#include "test_report_model.moc"
