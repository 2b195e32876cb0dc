// The GUI's file loader on real trace files written by capture's TraceWriter: the store
// holds the numbers written; a growing file is followed (new steps, a rewind, kernel names
// that appear later); damaged, truncated, foreign and missing files end in a message that
// names the file, leave the store empty, and the loader keeps working; steps far apart
// load in a few batches.
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>
#include <fstream>
#include <hdf5.h>

#include "models/open_trace.h"
#include "models/trace_file_loader.h"
#include "real_run.h"
#include "trace_file.h"

using namespace fp8scope;
using namespace fp8scope::views;
namespace t = fp8scope::testing;

class TraceLoaderTest : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;
    t::SyntheticSpec spec_;

    // Opens `path` and waits for the load; the spy counts failures.
    static void load(TraceFileLoader& loader, const QString& path) {
        loader.open(path);
        QVERIFY(loader.wait(30000));
        QCoreApplication::processEvents();  // the loader's queued signals
    }
    static std::int64_t last_step(const SeriesStore& s) { return s.read([](const TraceData& d) { return d.last_step; }); }

    // Loads a bad file after a good one: a message naming the file, the good trace still in
    // the store (a bad file never empties the window), and a good file still opens afterwards.
    void expectRejected(const QString& bad, const QString& why) {
        SeriesStore store;
        TraceFileLoader loader(&store);
        QSignalSpy failed(&loader, &TraceFileLoader::failed);
        load(loader, dir_.filePath("good.h5"));
        QCOMPARE(failed.count(), 0);
        load(loader, bad);
        QCOMPARE(failed.count(), 1);
        const QString msg = failed.at(0).at(1).toString();
        QVERIFY2(msg.contains(bad) && msg.contains(why, Qt::CaseInsensitive), qPrintable(msg));
        QCOMPARE(store.read([](const TraceData& d) { return static_cast<int>(d.meta.runs.size()); }), spec_.runs);
        QCOMPARE(last_step(store), spec_.steps - 1);
        load(loader, dir_.filePath("good.h5"));
        QCOMPARE(failed.count(), 1);
        QCOMPARE(last_step(store), spec_.steps - 1);
    }

private slots:
    void initTestCase() {
        QVERIFY(dir_.isValid());
        t::write_synthetic_trace(dir_.filePath("good.h5"), spec_);
    }

    void storeHoldsTheNumbersWritten() {
        SeriesStore store;
        TraceFileLoader loader(&store);
        QSignalSpy finished(&loader, &TraceFileLoader::finished);
        load(loader, dir_.filePath("good.h5"));
        QCOMPARE(finished.count(), 1);
        store.read([&](const TraceData& d) {
            QCOMPARE(int(d.runs.size()), spec_.runs);
            QCOMPARE(d.meta.linears.size(), std::size_t(spec_.linears));
            QCOMPARE(d.meta.quantizers, t::synthetic_recipes());
            QCOMPARE(d.first_step, 0);
            QCOMPARE(d.last_step, spec_.steps - 1);
            const RunData& r = d.runs[2];
            QCOMPARE(r.info.name, std::string("blockwise"));
            QCOMPARE(r.steps.size(), std::size_t(spec_.steps));
            QCOMPARE(r.steps[&trace::StepRecord::loss][17], t::loss_of(2, 17));
            QCOMPARE(r.steps[&trace::StepRecord::eval_loss][20], t::eval_loss_of(2, 20));
            QVERIFY(std::isnan(r.steps[&trace::StepRecord::eval_loss][21]));
            QCOMPARE(r.steps[&trace::StepRecord::step_ms][33], 1e3 * t::step_time_of(2, 33));
            QCOMPARE(r.scaling.step.size(), std::size_t(spec_.steps));
            QCOMPARE(r.scaling.amax_at(41, 7), t::amax_of(2, 41, 7));
            QCOMPARE(r.scaling.scale_at(41, 7), t::scale_of(2, 41, 7));
            QCOMPARE(r.capture_steps, (std::vector<std::int64_t>{0, 10, 20, 30, 40}));
            const OperandRef ref{3, Gemm::Dgrad, Operand::DY};
            const OperandSummary* o = r.operand_at(25, ref);
            QVERIFY(o);
            QCOMPARE(o->step, 20);
            QCOMPARE(o->figures[&TensorStats::amax], double(t::amax_of(2, 20, ref.slot())));
            QCOMPARE(o->figures[&OutlierSummary::kurtosis], t::kurtosis_of(ref.slot(), 20));
            QCOMPARE(o->errors().size(), t::synthetic_recipes().size());
            QCOMPARE(o->errors()[1][&ErrorStats::sqnr_db], t::sqnr_of(2, 20, ref.slot(), 1));
            QCOMPARE(r.blockmaps.size(), 2 * t::synthetic_recipes().size());  // steps 0 and 25
            const auto maps = r.blockmaps_of(25, {0, Gemm::Fprop, Operand::X});
            QCOMPARE(maps.size(), t::synthetic_recipes().size());
            QCOMPARE(maps[0]->absmax[37], 38.0f);
            QCOMPARE(r.ops.size(), std::size_t(spec_.steps * spec_.ops_per_step));
            const auto& op = r.ops[6 * 4 + 1];  // step 4, second op
            QCOMPARE(op.end_ns - op.start_ns, std::int64_t(2000 + 10 * 2));
            QCOMPARE(d.events.size(), std::size_t(3));
            QCOMPARE(d.events[0].kind, trace::EventKind::NonFinite);
            QCOMPARE(d.events[1].detail, std::string("delayed -> current"));
        });
    }

    void followsAGrowingFile() {
        const QString path = dir_.filePath("growing.h5");
        trace::TraceMeta meta = t::synthetic_meta(spec_);
        trace::TraceWriter w(path.toStdString(), meta);
        t::write_synthetic_steps(w, spec_, 0, 20);
        w.flush();

        SeriesStore store;
        TraceFileLoader loader(&store);
        QSignalSpy grew(&loader, &TraceFileLoader::grew);
        load(loader, path);
        QCOMPARE(last_step(store), 19);

        t::write_synthetic_steps(w, spec_, 20, 35);
        w.write(trace::OpNameRecord{static_cast<std::int32_t>(meta.ops.size()), "sm90_fp8_gemm"});
        w.write(trace::OpRecord{1, 35, static_cast<std::int32_t>(meta.ops.size()), 0, 0, 0, 7, 0, 500});
        w.write(trace::StepRecord{1, 35, 9.5});
        w.flush();
        loader.setFollowing(true, 20);
        QTRY_COMPARE_WITH_TIMEOUT(last_step(store), 35, 10000);
        QVERIFY(grew.count() >= 1);
        store.read([&](const TraceData& d) {
            QCOMPARE(d.meta.ops.back(), std::string("sm90_fp8_gemm"));
            QCOMPARE(d.runs[0].steps.size(), std::size_t(35));
            QCOMPARE(d.runs[0].scaling.amax_at(30, 2), t::amax_of(0, 30, 2));
            QCOMPARE(d.runs[1].steps[&trace::StepRecord::loss].back(), 9.5);
            QCOMPARE(d.runs[1].ops.back().stream, 7);
            QCOMPARE(d.runs[0].capture_steps.back(), 30);
            QCOMPARE(d.events.size(), std::size_t(3));  // steps 5, 20 and 30
        });

        // A rewind: run 0 goes back to step 25 and records it again with another loss.
        w.write(trace::StepRecord{0, 25, 7.25});
        w.flush();
        QTRY_COMPARE_WITH_TIMEOUT(store.read([](const TraceData& d) { return d.runs[0].steps.size(); }),
                                  std::size_t(26), 10000);
        store.read([&](const TraceData& d) {
            QCOMPARE(d.runs[0].steps[&trace::StepRecord::loss].back(), 7.25);
            QCOMPARE(d.runs[0].steps.step.back(), 25.0);
        });
        loader.setFollowing(false);
        w.close();
    }

    // One step far from the others (a flipped sign bit, a huge last step) made the loader
    // walk [first, last] in batches of 20000 steps, for ever, and a step at INT64_MIN
    // wrapped "first - 1". The work now follows the rows in the file (issue 13).
    void farAwayStepsLoadInAFewBatches() {
        const QString path = dir_.filePath("far.h5");
        const trace::TraceMeta meta = t::synthetic_meta(spec_);
        const std::size_t slot_count = meta.linears.size() * trace::kOperandsPerLinear;
        trace::TraceWriter w(path.toStdString(), meta);
        auto put = [&](std::int64_t step) {
            trace::ScalingRecord sc;
            sc.run = 0;
            sc.step = step;
            sc.amax.assign(slot_count, 1.0f);
            sc.scale.assign(slot_count, 1.0f);
            w.write(sc);
            w.write(trace::StepRecord{0, step, 1.0});
        };
        put(0);
        put(1);
        put(INT64_MAX);
        w.flush();
        OpenTrace open(path.toStdString());
        int batches = 0;
        std::size_t scaling = 0;
        auto push = [&](TraceBatch&& b) {
            ++batches;
            scaling += b.scaling.size();
        };
        QCOMPARE(open.readNew(push), INT64_MAX);
        QCOMPARE(scaling, std::size_t(3));
        QVERIFY2(batches < 10, qPrintable(QString::number(batches)));
        put(INT64_MIN);  // a rewind to the lowest step there is
        w.flush();
        QVERIFY(open.refresh());
        scaling = 0;
        open.readNew(push);
        QCOMPARE(scaling, std::size_t(1));
        w.close();

        SeriesStore store;
        TraceFileLoader loader(&store);
        QSignalSpy finished(&loader, &TraceFileLoader::finished);
        load(loader, path);
        QCOMPARE(finished.count(), 1);
    }

    // A real lock-step run recorded as the engine records it: the store shows the
    // trainer's own losses for every run, and its capture steps.
    void realTrainingRun() {
        const QString path = dir_.filePath("real.h5");
        TrainConfig c = t::tiny_compare_config(12);
        c.compare = {"baseline", "mxfp8"};
        c.capture_every = 5;
        const auto seen = t::train_and_record(path.toStdString(), c, 10);
        QCOMPARE(seen.size(), std::size_t(24));
        SeriesStore store;
        TraceFileLoader loader(&store);
        load(loader, path);
        store.read([&](const TraceData& d) {
            QCOMPARE(d.runs.size(), std::size_t(2));
            QCOMPARE(d.runs[1].info.name, std::string("mxfp8"));
            for (const auto& r : seen) {
                const auto& cols = d.runs[r.run].steps;
                const std::ptrdiff_t row = d.runs[r.run].step_row_at(r.step);
                QVERIFY(row >= 0);
                QCOMPARE(cols.step[row], double(r.step));
                QCOMPARE(cols[&trace::StepRecord::loss][row], double(r.loss));
            }
            // Steps count from 1; the first step is captured, then every 5th.
            QCOMPARE(d.runs[1].capture_steps, (std::vector<std::int64_t>{1, 6, 11}));
            const OperandRef ref{0, Gemm::Fprop, Operand::X};
            const OperandSummary* o = d.runs[1].operand_at(11, ref);
            QVERIFY(o && o->step == 11 && o->figures[&TensorStats::amax] > 0);
            // The every-step amax and the capture's amax are the same tensor's.
            const auto& sc = d.runs[1].scaling;
            const auto row = std::find(sc.step.begin(), sc.step.end(), 11.0) - sc.step.begin();
            QCOMPARE(double(sc.amax_at(row, ref.slot())), double(float(o->figures[&TensorStats::amax])));
            QVERIFY(!d.runs[1].ops.empty());
        });
    }

    void garbageFile() {
        const QString path = dir_.filePath("garbage.h5");
        std::ofstream(path.toStdString()) << "this is not a trace, just some text\n";
        expectRejected(path, "HDF5");
    }

    void truncatedFile() {
        const QString path = dir_.filePath("truncated.h5");
        QFile::copy(dir_.filePath("good.h5"), path);
        QFile f(path);
        QVERIFY(f.resize(f.size() / 3));
        expectRejected(path, "");
    }

    void foreignHdf5File() {
        const QString path = dir_.filePath("foreign.h5");
        hid_t f = H5Fcreate(path.toUtf8().constData(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
        QVERIFY(f >= 0);
        hid_t g = H5Gcreate2(f, "/weights", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        H5Gclose(g);
        H5Fclose(f);
        expectRejected(path, "not an fp8scope trace");
    }

    void missingFile() { expectRejected(dir_.filePath("nowhere.h5"), "nowhere.h5"); }
};

QTEST_GUILESS_MAIN(TraceLoaderTest)
#include "test_trace_loader.moc"
