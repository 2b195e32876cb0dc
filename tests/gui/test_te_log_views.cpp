// A trace imported from Transformer Engine statistics logs, opened as the GUI opens a file:
// the store holds a run per rank, the logged iterations as capture steps, the amax per
// step, and the layers table shows the logged figures in the GEMMs their copies feed.
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>
#include <filesystem>
#include <fstream>

#include "models/layers_model.h"
#include "models/model_roles.h"
#include "models/trace_file_loader.h"
#include "te_log.h"
#include "te_log_trace.h"

using namespace fp8scope;
using namespace fp8scope::views;

namespace {

std::string stats_line(const std::string& name, int iteration, const std::string& value) {
    char it[32];
    std::snprintf(it, sizeof it, "%06d", iteration);
    return "2025-06-10 12:00:01,123 - INFO - " + name + " \t\t\t\t iteration=" + it + " \t\t\t\t value=" + value + "\n";
}

}  // namespace

class TeLogViewsTest : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;
    QString trace_;
    const std::string qkv_ = "model.decoder.layers.0.self_attention.linear_qkv";

private slots:
    void initTestCase() {
        QVERIFY(dir_.isValid());
        const std::string logs = dir_.filePath("log/nvdlfw_inspect_statistics_logs").toStdString();
        std::filesystem::create_directories(logs);
        for (int rank : {0, 1}) {
            std::ofstream out(logs + "/nvdlfw_inspect_globalrank-" + std::to_string(rank) + ".log");
            for (int it : {10, 20, 30}) {
                out << stats_line(qkv_ + "_activation_cur_amax", it, std::to_string(it / 10 + rank) + ".5000")
                    << stats_line(qkv_ + "_activation_underflows%", it, "0.2500")
                    << stats_line(qkv_ + "_activation_mxfp8_underflows%_columnwise", it, "0.7500")
                    << stats_line(qkv_ + "_gradient_dynamic_range", it, "21.0000");
            }
        }
        trace_ = dir_.filePath("run.h5");
        const te_log::Log log = te_log::read_logs(te_log::find_logs({dir_.filePath("log").toStdString()}));
        te_log::write_trace(log, te_log::convert(log, "test"), trace_.toStdString());
    }

    void storeAndLayersTableHoldTheLoggedFigures() {
        SeriesStore store;
        TraceFileLoader loader(&store);
        QSignalSpy failed(&loader, &TraceFileLoader::failed);
        loader.open(trace_);
        QVERIFY(loader.wait(30000));
        QCoreApplication::processEvents();
        QCOMPARE(failed.count(), 0);
        store.read([&](const TraceData& d) {
            QCOMPARE(d.meta.runs.size(), std::size_t(2));
            QCOMPARE(d.meta.runs[1].name, std::string("rank 1"));
            QCOMPARE(d.first_step, std::int64_t(10));
            QCOMPARE(d.last_step, std::int64_t(30));
            for (int run : {0, 1}) {
                const RunData& r = d.runs[std::size_t(run)];
                QCOMPARE(r.capture_steps, (std::vector<std::int64_t>{10, 20, 30}));
                QCOMPARE(r.scaling.step.size(), std::size_t(3));
                const int slot = trace::operand_slot(0, Gemm::Wgrad, Operand::X);
                QCOMPARE(r.scaling.amax_at(2, slot), float(3 + run) + 0.5f);
            }
        });

        LayersModel layers(&store);
        layers.refresh(1, 20);
        auto value = [&](const OperandRef& ref, LayersModel::Column c) {
            const int row = layers.rowOf(ref);
            return row < 0 ? -1.0 : layers.data(layers.index(row, c), kValueRole).toDouble();
        };
        const OperandRef fprop_x{0, Gemm::Fprop, Operand::X}, wgrad_x{0, Gemm::Wgrad, Operand::X};
        QCOMPARE(value(fprop_x, LayersModel::Amax), 3.5);
        QCOMPARE(value(wgrad_x, LayersModel::Amax), 3.5);
        // The bare underflows% is the recipe in use's, of the rowwise copy: fprop's.
        QCOMPARE(value(fprop_x, LayersModel::UnderflowPct), 0.25);
        QVERIFY(std::isnan(value(wgrad_x, LayersModel::UnderflowPct)));
        QCOMPARE(value({0, Gemm::Dgrad, Operand::DY}, LayersModel::DynamicRange), 21.0);
    }

    void aLogOfTensorStatisticsAloneHasNoQuantizers() {
        QTemporaryDir dir;
        const std::string path = dir.filePath("stats.log").toStdString();
        std::ofstream(path) << stats_line(qkv_ + "_weight_cur_amax", 1, "0.1250") << stats_line(qkv_ + "_weight_std", 1, "0.0200");
        const te_log::Log log = te_log::read_logs(te_log::find_logs({path}));
        const QString trace = dir.filePath("stats.h5");
        te_log::write_trace(log, te_log::convert(log, "test"), trace.toStdString());
        SeriesStore store;
        TraceFileLoader loader(&store);
        loader.open(trace);
        QVERIFY(loader.wait(30000));
        QCoreApplication::processEvents();
        QCOMPARE(store.read([](const TraceData& d) { return d.meta.quantizers.size(); }), std::size_t(0));
        LayersModel layers(&store);
        layers.refresh(0, 1);
        const int row = layers.rowOf({0, Gemm::Dgrad, Operand::W});
        QVERIFY(row >= 0);
        QCOMPARE(layers.data(layers.index(row, LayersModel::Amax), kValueRole).toDouble(), 0.125);
        QVERIFY(std::isnan(layers.data(layers.index(row, LayersModel::UnderflowPct), kValueRole).toDouble()));
    }
};

QTEST_MAIN(TeLogViewsTest)
#include "test_te_log_views.moc"
