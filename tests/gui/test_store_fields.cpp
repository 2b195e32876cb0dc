// Every field of the step, rank, operand and error records reaches the series store from
// a trace file: one record of each, every field a distinct value, written with capture's
// TraceWriter and loaded with the GUI's loader. The expected columns and values are
// written out here by hand, not taken from the field lists the store is filled from: a
// field added to a list fails this test until it is added here, and a field the store
// drops fails it too.
#include <QTemporaryDir>
#include <QTest>

#include "models/trace_file_loader.h"
#include "trace_writer.h"

using namespace fp8scope;
using namespace fp8scope::views;
using trace::OperandRecord;
using trace::RankStepRecord;
using trace::StepRecord;

namespace {

std::vector<std::string> strings(const std::vector<std::string_view>& v) { return {v.begin(), v.end()}; }

trace::TraceMeta meta() {
    trace::TraceMeta m;
    m.runs = {{"baseline", "baseline"}, {"delayed", "delayed"}};
    m.linears = {{"blocks.0.attn.qkv", 0, 64, 192}};
    m.quantizers = {"current_e4m3", "delayed_e4m3"};
    m.training_recipes = {"baseline", "delayed"};
    m.world_size = 2;
    m.grad_dtype = "bf16";
    return m;
}

StepRecord step_record() {
    return {.run = 1, .step = 7, .loss = 3.25, .eval_loss = 3.5, .lr = 0.125, .grad_norm = 1.75,
            .step_ms = 62.5, .tokens_per_s = 4096.5, .recipe = 1};
}

RankStepRecord rank_record() {
    return {.step = 7, .rank = 1, .compute_ms = 120.5, .comm_ms = 8.25, .step_ms = 130.75, .loss = 3.125,
            .grad_bytes = 2.5e6, .grad_error = 0.001953125,
            .grad_snr_db = 28.5, .grad_underflow_pct = 0.125, .grad_overflow_pct = 0.0};
}

OperandRecord operand_record() {
    OperandRecord o;
    o.key = {1, 7, 0, Gemm::Dgrad, Operand::DY};
    o.quantizer_in_use = 1;
    o.scale = 112.0;
    TensorStats& s = o.stats;
    s.numel = 1000, s.finite = 990, s.nan = 6, s.inf = 4, s.zero = 11;
    s.amax = 4.5, s.min_nonzero_abs = 0.000244140625, s.mean = -0.03125, s.rms = 0.75, s.stddev = 0.5,
    s.dynamic_range = 14.25;
    s.histogram.bins[3] = 2, s.histogram.zero = 11, s.histogram.nan = 6, s.histogram.inf = 4;
    s.outliers.kurtosis = 9.5, s.outliers.k = 6.0, s.outliers.frac_beyond_k_rms = 0.015625;
    s.outliers.channel_absmax = {4.5f, 1.0f};
    for (int r = 0; r < 2; ++r) {
        ErrorStats e;
        e.amax = 4.5 + r, e.mse = 0.01 + r, e.sqnr_db = 30.5 + r, e.rel_l2 = 0.03 + r, e.max_abs_err = 0.25 + r;
        e.cosine = 0.999 - r, e.underflow_pct = 1.5 + r, e.overflow_pct = 0.5 + r, e.scale_inv_min = 0.125 + r;
        e.scale_inv_max = 0.25 + r, e.nonfinite_out = 3 + r;
        o.errors.push_back(e);
    }
    o.amax_history = {4.0f, 4.5f};
    return o;
}

}  // namespace

class StoreFieldsTest : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;

private slots:
    void everyFieldReachesTheStore() {
        QVERIFY(dir_.isValid());
        const std::string path = dir_.filePath("fields.h5").toStdString();
        {
            trace::TraceWriter w(path, meta());
            w.write(operand_record());
            w.write(step_record());
            w.write(rank_record());
            w.close();
        }
        SeriesStore store;
        TraceFileLoader loader(&store);
        loader.open(QString::fromStdString(path));
        QVERIFY(loader.wait(30000));
        QCoreApplication::processEvents();
        store.read([](const TraceData& d) {
            QCOMPARE(d.runs.size(), std::size_t(2));

            // Steps: every field but step (the row key) is a column.
            const StepColumns& c = d.runs[1].steps;
            QCOMPARE(strings(StepColumns::names()), (std::vector<std::string>{"run", "loss", "eval_loss", "lr",
                                                                              "grad_norm", "step_ms",
                                                                              "tokens_per_s", "recipe"}));
            QCOMPARE(c.step, std::vector<double>{7});
            QCOMPARE(c[&StepRecord::run], std::vector<double>{1});
            QCOMPARE(c[&StepRecord::loss], std::vector<double>{3.25});
            QCOMPARE(c[&StepRecord::eval_loss], std::vector<double>{3.5});
            QCOMPARE(c[&StepRecord::lr], std::vector<double>{0.125});
            QCOMPARE(c[&StepRecord::grad_norm], std::vector<double>{1.75});
            QCOMPARE(c[&StepRecord::step_ms], std::vector<double>{62.5});
            QCOMPARE(c[&StepRecord::tokens_per_s], std::vector<double>{4096.5});
            QCOMPARE(c[&StepRecord::recipe], std::vector<double>{1});

            // Ranks: in float32.
            QCOMPARE(d.ranks.size(), std::size_t(2));
            const RankColumns& k = d.ranks[1];
            QCOMPARE(strings(RankColumns::names()),
                     (std::vector<std::string>{"rank", "compute_ms", "comm_ms", "step_ms", "loss", "grad_bytes",
                                               "grad_error", "grad_snr_db", "grad_underflow_pct", "grad_overflow_pct"}));
            QCOMPARE(k.step, std::vector<double>{7});
            QCOMPARE(k[&RankStepRecord::rank], std::vector<float>{1});
            QCOMPARE(k[&RankStepRecord::compute_ms], std::vector<float>{120.5f});
            QCOMPARE(k[&RankStepRecord::comm_ms], std::vector<float>{8.25f});
            QCOMPARE(k[&RankStepRecord::step_ms], std::vector<float>{130.75f});
            QCOMPARE(k[&RankStepRecord::loss], std::vector<float>{3.125f});
            QCOMPARE(k[&RankStepRecord::grad_bytes], std::vector<float>{2.5e6f});
            QCOMPARE(k[&RankStepRecord::grad_error], std::vector<float>{0.001953125f});
            QCOMPARE(k[&RankStepRecord::grad_snr_db], std::vector<float>{28.5f});
            QCOMPARE(k[&RankStepRecord::grad_underflow_pct], std::vector<float>{0.125f});
            QCOMPARE(k[&RankStepRecord::grad_overflow_pct], std::vector<float>{0.0f});
            QCOMPARE(k.error_step, std::vector<double>{7});
            QCOMPARE(k.grad_error, std::vector<float>{0.001953125f});

            // Operands: every numeric figure of the record and of its statistics.
            const OperandSummary* o = d.runs[1].operand_at(7, {0, Gemm::Dgrad, Operand::DY});
            QVERIFY(o);
            QCOMPARE(o->step, 7);
            QCOMPARE(o->recipe_in_use, 1);
            QCOMPARE(RecordFigures<OperandRecord>::names(),
                     (std::vector<std::string>{
                         "key.run", "key.step", "key.linear", "key.gemm", "key.operand", "quantizer_in_use", "scale",
                         "stats.numel", "stats.finite", "stats.nan", "stats.inf", "stats.zero", "stats.amax",
                         "stats.min_nonzero_abs", "stats.mean", "stats.rms", "stats.stddev", "stats.dynamic_range",
                         "stats.histogram.zero", "stats.histogram.nan", "stats.histogram.inf",
                         "stats.outliers.kurtosis", "stats.outliers.k", "stats.outliers.frac_beyond_k_rms"}));
            const auto& f = o->figures;
            QCOMPARE(f[&trace::OperandKey::run], 1.0);
            QCOMPARE(f[&trace::OperandKey::step], 7.0);
            QCOMPARE(f[&trace::OperandKey::linear], 0.0);
            QCOMPARE(f[&trace::OperandKey::gemm], 1.0);
            QCOMPARE(f[&trace::OperandKey::operand], 2.0);
            QCOMPARE(f[&OperandRecord::quantizer_in_use], 1.0);
            QCOMPARE(f[&OperandRecord::scale], 112.0);
            QCOMPARE(f[&TensorStats::numel], 1000.0);
            QCOMPARE(f[&TensorStats::finite], 990.0);
            QCOMPARE(f[&TensorStats::nan], 6.0);
            QCOMPARE(f[&TensorStats::inf], 4.0);
            QCOMPARE(f[&TensorStats::zero], 11.0);
            QCOMPARE(f[&TensorStats::amax], 4.5);
            QCOMPARE(f[&TensorStats::min_nonzero_abs], 0.000244140625);
            QCOMPARE(f[&TensorStats::mean], -0.03125);
            QCOMPARE(f[&TensorStats::rms], 0.75);
            QCOMPARE(f[&TensorStats::stddev], 0.5);
            QCOMPARE(f[&TensorStats::dynamic_range], 14.25);
            QCOMPARE(f[&Log2Histogram::zero], 11.0);
            QCOMPARE(f[&Log2Histogram::nan], 6.0);
            QCOMPARE(f[&Log2Histogram::inf], 4.0);
            QCOMPARE(f[&OutlierSummary::kurtosis], 9.5);
            QCOMPARE(f[&OutlierSummary::k], 6.0);
            QCOMPARE(f[&OutlierSummary::frac_beyond_k_rms], 0.015625);
            QCOMPARE(o->histogram().count(3 + kHistMinExp), 2);
            QCOMPARE(std::vector<float>(o->channel_absmax().begin(), o->channel_absmax().end()),
                     (std::vector<float>{4.5f, 1.0f}));
            QCOMPARE(std::vector<float>(o->amax_history().begin(), o->amax_history().end()),
                     (std::vector<float>{4.0f, 4.5f}));

            // Errors: every numeric figure of each recipe; the name is the meta's.
            QCOMPARE(ErrorFigures::names(),
                     (std::vector<std::string>{"amax", "mse", "sqnr_db", "rel_l2", "max_abs_err", "cosine",
                                               "underflow_pct", "overflow_pct", "scale_inv_min", "scale_inv_max",
                                               "nonfinite_out"}));
            QCOMPARE(o->errors().size(), std::size_t(2));
            for (int r = 0; r < 2; ++r) {
                const ErrorFigures& e = o->errors()[r];
                QCOMPARE(e[&ErrorStats::amax], 4.5 + r);
                QCOMPARE(e[&ErrorStats::mse], 0.01 + r);
                QCOMPARE(e[&ErrorStats::sqnr_db], 30.5 + r);
                QCOMPARE(e[&ErrorStats::rel_l2], 0.03 + r);
                QCOMPARE(e[&ErrorStats::max_abs_err], 0.25 + r);
                QCOMPARE(e[&ErrorStats::cosine], 0.999 - r);
                QCOMPARE(e[&ErrorStats::underflow_pct], 1.5 + r);
                QCOMPARE(e[&ErrorStats::overflow_pct], 0.5 + r);
                QCOMPARE(e[&ErrorStats::scale_inv_min], 0.125 + r);
                QCOMPARE(e[&ErrorStats::scale_inv_max], 0.25 + r);
                QCOMPARE(e[&ErrorStats::nonfinite_out], 3.0 + r);
            }
        });
    }
};

QTEST_GUILESS_MAIN(StoreFieldsTest)
#include "test_store_fields.moc"
