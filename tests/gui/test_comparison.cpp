// Several traces as one comparison (their runs side by side, named by file, ids merged by
// name), and reading a trace in batches: every run's steps arrive in windows of at most
// OpenTrace::kBatchSteps steps, round robin over the runs, with progress up to 100%, and a
// trace that rewinds often ends with exactly the history the run kept.
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>
#include <set>

#include "models/open_trace.h"
#include "models/trace_file_loader.h"
#include "models/trace_merge.h"
#include "trace_file.h"

using namespace fp8scope;
using namespace fp8scope::views;
namespace t = fp8scope::testing;

class ComparisonTest : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;
    t::SyntheticSpec a_, b_;

    static void load(TraceFileLoader& loader, const QStringList& paths) {
        loader.open(paths);
        QVERIFY(loader.wait(60000));
        QCoreApplication::processEvents();  // the loader's queued signals
    }

    // b's names in another order, and one recipe and one kernel that a lacks.
    static trace::TraceMeta meta_b(const t::SyntheticSpec& s) {
        trace::TraceMeta m = t::synthetic_meta(s);
        std::swap(m.quantizers[0], m.quantizers[3]);
        m.quantizers.push_back("block1x32_e5m2");
        std::reverse(m.training_recipes.begin(), m.training_recipes.end());
        m.ops.push_back("cutlass_gemm");
        return m;
    }

private slots:
    void initTestCase() {
        QVERIFY(dir_.isValid());
        a_.runs = 3;
        b_.runs = 2;
        b_.steps = 30;
        t::write_synthetic_trace(dir_.filePath("a.h5"), a_);
        t::write_synthetic_trace(dir_.filePath("b.h5"), b_);
    }

    void mergedNamesAndIds() {
        TraceMerge merge({{"a.h5", t::synthetic_meta(a_)}, {"b.h5", meta_b(b_)}});
        const trace::TraceMeta& m = merge.meta();
        QCOMPARE(m.runs.size(), std::size_t(5));
        QCOMPARE(m.runs[0].name, std::string("a.h5: baseline"));
        QCOMPARE(m.runs[2].name, std::string("a.h5: blockwise"));
        QCOMPARE(m.runs[3].name, std::string("b.h5: baseline"));
        QCOMPARE(m.runs[4].name, std::string("b.h5: delayed"));
        QCOMPARE(m.baseline_run, 0);  // a's, the first part's with one
        QCOMPARE(m.quantizers.size(), std::size_t(5));  // a's four and b's extra one
        QCOMPARE(m.quantizers[4], std::string("block1x32_e5m2"));
        QCOMPARE(m.ops.size(), std::size_t(7));
        QCOMPARE(m.linears.size(), std::size_t(a_.linears));

        // b's records move to runs 3 and 4 and to a's ids.
        TraceBatch batch;
        batch.steps.push_back({1, 5, 2.0, NAN, 1e-3, 1.0, 0.1, 1.0, 0});  // b's training recipe 0: "current"
        trace::OperandRecord o = t::synthetic_operand(b_, 1, 10, 0, Gemm::Fprop, Operand::X);
        o.quantizer_in_use = 0;  // b's recipe 0 is a's recipe 3
        o.errors.clear();
        for (int r = 0; r < 5; ++r) {
            o.errors.push_back({});
            o.errors.back().recipe = meta_b(b_).quantizers[r];
            o.errors.back().sqnr_db = 10.0 * r;
        }
        batch.operands.push_back(o);
        batch.ops.push_back({0, 5, 6, -1, -1, -1, 0, 1, 2});  // b's "cutlass_gemm"
        batch.events.push_back({-1, 5, trace::EventKind::Start, ""});
        batch.events.push_back({1, 5, trace::EventKind::Rewind, ""});
        merge.remap(1, batch);
        QCOMPARE(batch.steps[0].run, 4);
        QCOMPARE(m.training_recipes[batch.steps[0].recipe], std::string("current"));
        const auto& got = batch.operands[0];
        QCOMPARE(got.key.run, 4);
        QCOMPARE(got.quantizer_in_use, 3);
        QCOMPARE(got.errors.size(), std::size_t(5));
        for (int r = 0; r < 5; ++r) QCOMPARE(got.errors[r].recipe, m.quantizers[r]);
        QCOMPARE(got.errors[3].sqnr_db, 0.0);   // b's recipe 0
        QCOMPARE(got.errors[0].sqnr_db, 30.0);  // b's recipe 3
        QCOMPARE(got.errors[4].sqnr_db, 40.0);
        QCOMPARE(batch.ops[0].run, 3);
        QCOMPARE(m.ops[batch.ops[0].op], std::string("cutlass_gemm"));
        QCOMPARE(batch.events[0].run, -1);
        QCOMPARE(batch.events[1].run, 4);

        // A kernel name that b's file adds later gets the next merged id.
        TraceBatch later;
        later.op_names.push_back({7, "late_kernel"});
        later.ops.push_back({1, 6, 7, -1, -1, -1, 0, 1, 2});
        merge.remap(1, later);
        QCOMPARE(later.op_names.size(), std::size_t(1));
        QCOMPARE(later.op_names[0].id, 7);
        QCOMPARE(later.ops[0].op, 7);
        QCOMPARE(merge.meta().ops[7], std::string("late_kernel"));
    }

    // c: another model. Its linear 0 is a's linear 0 by name with other shapes, its
    // linear 1 is a's linear 1, its linear 2 is new: merged ids 0, 1 and 4 (after a's four).
    static trace::TraceMeta meta_c() {
        t::SyntheticSpec spec;
        spec.runs = 2;
        trace::TraceMeta m = t::synthetic_meta(spec);
        m.linears = {{"blocks.0.attn.qkv", 0, 32, 96}, {"blocks.0.mlp.fc1", 0, 64, 128}, {"blocks.0.attn.proj", 0, 96, 32}};
        return m;
    }

    void differentModelsUniteLinearsByName() {
        TraceMerge merge({{"a.h5", t::synthetic_meta(a_)}, {"c.h5", meta_c()}});
        const trace::TraceMeta& m = merge.meta();
        QCOMPARE(m.linears.size(), std::size_t(5));
        const std::vector<std::string> names{"blocks.0.attn.qkv", "blocks.0.mlp.fc1", "blocks.1.attn.qkv",
                                             "blocks.1.mlp.fc1", "blocks.0.attn.proj"};
        for (int l = 0; l < 5; ++l) QCOMPARE(m.linears[l].name, names[l]);
        QCOMPARE(m.linears[0].in_features, std::int64_t(64));  // a's: the first part's
        QCOMPARE(m.linears[4].in_features, std::int64_t(96));
        QVERIFY(merge.shapesDiffer(0));
        for (int l = 1; l < 5; ++l) QVERIFY(!merge.shapesDiffer(l));
        QCOMPARE(m.runs.size(), std::size_t(5));

        // c's records: linear 0 -> 0, 1 -> 1, 2 -> 4; its slot s of linear l goes to
        // merged slot 6 * merged(l) + s % 6, and a's linears 2 and 3 are NaN in c's rows.
        TraceBatch batch;
        trace::ScalingRecord sc{1, 7, {}, {}};
        for (int s = 0; s < 18; ++s) {
            sc.amax.push_back(100.0f + s);
            sc.scale.push_back(200.0f + s);
        }
        batch.scaling.push_back(sc);
        batch.operands.push_back(t::synthetic_operand(b_, 0, 10, 2, Gemm::Dgrad, Operand::W));
        trace::BlockMapRecord bm;
        bm.key = {1, 10, 0, Gemm::Wgrad, Operand::DY};
        batch.blockmaps.push_back(bm);
        batch.ops.push_back({0, 7, 0, 2, 0, -1, 0, 1, 2});
        batch.ops.push_back({0, 7, 4, -1, -1, -1, 0, 1, 2});
        merge.remap(1, batch);
        const auto& got = batch.scaling[0];
        QCOMPARE(got.run, 4);
        QCOMPARE(got.amax.size(), std::size_t(30));
        QCOMPARE(got.scale.size(), std::size_t(30));
        for (int s = 0; s < 6; ++s) {
            QCOMPARE(got.amax[s], 100.0f + s);        // qkv: c's slots 0..5
            QCOMPARE(got.amax[6 + s], 106.0f + s);    // fc1: c's slots 6..11
            QCOMPARE(got.scale[6 + s], 206.0f + s);
            QCOMPARE(got.amax[24 + s], 112.0f + s);   // proj: c's slots 12..17
            QCOMPARE(got.scale[24 + s], 212.0f + s);
        }
        for (int s = 12; s < 24; ++s) QVERIFY(std::isnan(got.amax[s]) && std::isnan(got.scale[s]));
        QCOMPARE(got.amax[trace::operand_slot(4, Gemm::Dgrad, Operand::W)], 100.0f + trace::operand_slot(2, Gemm::Dgrad, Operand::W));
        QCOMPARE(batch.operands[0].key.run, 3);
        QCOMPARE(batch.operands[0].key.linear, 4);
        QCOMPARE(batch.operands[0].key.gemm, Gemm::Dgrad);
        QCOMPARE(batch.blockmaps[0].key.linear, 0);
        QCOMPARE(batch.blockmaps[0].key.run, 4);
        QCOMPARE(batch.ops[0].linear, 4);
        QCOMPARE(batch.ops[1].linear, -1);  // an op of no linear

        // a's rows keep their slots and gain NaN for c's proj.
        TraceBatch first;
        first.scaling.push_back({0, 7, std::vector<float>(24, 3.0f), std::vector<float>(24, 4.0f)});
        first.operands.push_back(t::synthetic_operand(a_, 2, 10, 3, Gemm::Fprop, Operand::X));
        merge.remap(0, first);
        QCOMPARE(first.scaling[0].amax.size(), std::size_t(30));
        for (int s = 0; s < 24; ++s) QCOMPARE(first.scaling[0].amax[s], 3.0f);
        for (int s = 24; s < 30; ++s) QVERIFY(std::isnan(first.scaling[0].amax[s]));
        QCOMPARE(first.operands[0].key.linear, 3);
        QCOMPARE(first.operands[0].key.run, 2);
    }

    // Two files of different models open as one: the smaller model's runs have the shared
    // linears' figures in their slots and none in the others'.
    void differentModelsOverlayInOneStore() {
        t::SyntheticSpec other = b_;
        other.linears = 2;
        const QString c = dir_.filePath("c.h5");
        t::write_synthetic_trace(c, other);
        SeriesStore store;
        TraceFileLoader loader(&store);
        QSignalSpy finished(&loader, &TraceFileLoader::finished);
        load(loader, {dir_.filePath("a.h5"), c});
        QCOMPARE(finished.count(), 1);
        store.read([&](const TraceData& d) {
            QCOMPARE(d.meta.linears.size(), std::size_t(a_.linears));
            QCOMPARE(d.runs.size(), std::size_t(5));
            QCOMPARE(d.runs[4].steps[&trace::StepRecord::loss][17], t::loss_of(1, 17));
            QCOMPARE(d.runs[4].steps[&trace::StepRecord::step_ms][17], 1000 * t::step_time_of(1, 17));
            const ScalingColumns& sc = d.runs[4].scaling;
            QCOMPARE(sc.slot_count, a_.linears * 6);
            for (int s = 0; s < 12; ++s) QCOMPARE(sc.amax_at(5, s), t::amax_of(1, 5, s));
            for (int s = 12; s < 24; ++s) QVERIFY(std::isnan(sc.amax_at(5, s)));
            QVERIFY(d.runs[4].operand_at(20, {1, Gemm::Fprop, Operand::X}));
            QVERIFY(!d.runs[4].operand_at(20, {2, Gemm::Fprop, Operand::X}));
            QVERIFY(d.runs[1].operand_at(20, {2, Gemm::Fprop, Operand::X}));
        });
    }

    void twoFilesOverlayInOneStore() {
        SeriesStore store;
        TraceFileLoader loader(&store);
        QSignalSpy finished(&loader, &TraceFileLoader::finished);
        load(loader, {dir_.filePath("a.h5"), dir_.filePath("b.h5")});
        QCOMPARE(finished.count(), 1);
        store.read([&](const TraceData& d) {
            QCOMPARE(d.runs.size(), std::size_t(5));
            QCOMPARE(d.runs[4].info.name, std::string("b.h5: delayed"));
            QCOMPARE(d.runs[0].steps.size(), std::size_t(a_.steps));
            QCOMPARE(d.runs[3].steps.size(), std::size_t(b_.steps));
            QCOMPARE(d.runs[4].steps[&trace::StepRecord::loss][17], t::loss_of(1, 17));  // b's run 1
            QCOMPARE(d.runs[4].capture_steps.size(), std::size_t(3));
            const auto* o = d.runs[4].operand_at(20, {1, Gemm::Fprop, Operand::X});
            QVERIFY(o);
            QCOMPARE(o->errors()[2][&ErrorStats::sqnr_db], t::sqnr_of(1, 20, trace::operand_slot(1, Gemm::Fprop, Operand::X), 2));
            QCOMPARE(d.last_step, a_.steps - 1);
        });
    }

    void batchesAreWindowsRoundRobin() {
        t::SyntheticSpec big = a_;
        big.steps = 1000;
        big.blockmap_every = 0;
        const QString path = dir_.filePath("big.h5");
        t::write_synthetic_trace(path, big);
        OpenTrace open(path.toStdString());
        std::vector<std::pair<int, std::set<std::int64_t>>> windows;  // (run, steps) of each batch
        std::vector<std::pair<std::size_t, std::size_t>> progress;
        open.readNew(
            [&](TraceBatch&& b) {
                if (b.steps.empty()) return;  // the head: names and events
                std::set<std::int64_t> steps;
                for (const auto& s : b.steps) steps.insert(s.step);
                for (const auto& s : b.scaling) steps.insert(s.step);
                for (const auto& o : b.ops) steps.insert(o.step);
                windows.push_back({b.steps.front().run, steps});
            },
            [&](std::size_t done, std::size_t total) { progress.push_back({done, total}); });
        const std::size_t per_run = (1000 + OpenTrace::kBatchSteps - 1) / OpenTrace::kBatchSteps;
        QCOMPARE(windows.size(), per_run * big.runs);
        for (std::size_t i = 0; i < windows.size(); ++i) {
            QCOMPARE(windows[i].first, int(i % big.runs));  // round robin
            QVERIFY(windows[i].second.size() <= OpenTrace::kBatchSteps);
            QCOMPARE(*windows[i].second.begin(), std::int64_t(i / big.runs * OpenTrace::kBatchSteps));
        }
        QCOMPARE(progress.size(), windows.size());
        QCOMPARE(progress.back().first, progress.back().second);

        SeriesStore store;
        TraceFileLoader loader(&store);
        QSignalSpy percent(&loader, &TraceFileLoader::progress);
        load(loader, {path});
        QVERIFY(percent.count() >= 2);
        QCOMPARE(percent.last().at(1).toInt(), 100);
        for (int i = 1; i < percent.count(); ++i) QVERIFY(percent.at(i).at(1).toInt() > percent.at(i - 1).at(1).toInt());
        store.read([&](const TraceData& d) {
            for (const RunData& r : d.runs) {
                QCOMPARE(r.steps.size(), std::size_t(1000));
                QCOMPARE(r.scaling.step.size(), std::size_t(1000));
                QCOMPARE(r.capture_steps.size(), std::size_t(100));
                QCOMPARE(r.ops.size(), std::size_t(1000 * big.ops_per_step));
            }
        });
    }

    // A run that goes back 3 steps every 4 (rewinds to checkpoints) ends with the history
    // it kept: steps 1..18 once each, ascending, each from its last recording.
    void aRewindingTraceLeavesTheKeptHistory() {
        const QString path = dir_.filePath("rewinds.h5");
        const trace::TraceMeta meta = t::synthetic_meta(a_);
        std::map<std::int64_t, double> last_loss;
        {
            trace::TraceWriter w(path.toStdString(), meta);
            std::int64_t step = 1;
            for (int n = 0; n < 60; ++n, ++step) {
                w.write(trace::ScalingRecord{0, step, std::vector<float>(24, float(n)), std::vector<float>(24, 1.0f)});
                w.write(trace::StepRecord{0, step, double(n)});
                last_loss[step] = n;
                if (n % 4 == 3) step -= 3;
            }
            w.close();
        }
        SeriesStore store;
        TraceFileLoader loader(&store);
        load(loader, {path});
        store.read([&](const TraceData& d) {
            const RunData& r = d.runs[0];
            QCOMPARE(r.steps.size(), last_loss.size());
            QCOMPARE(r.scaling.step.size(), last_loss.size());
            std::size_t i = 0;
            for (const auto& [step, loss] : last_loss) {
                QCOMPARE(r.steps.step[i], double(step));
                QCOMPARE(r.steps[&trace::StepRecord::loss][i], loss);
                QCOMPARE(r.scaling.amax_at(i, 0), float(loss));
                ++i;
            }
        });
    }
};

QTEST_MAIN(ComparisonTest)
#include "test_comparison.moc"
