// Live runs from the GUI's side: the engine command line a launch becomes; a launched
// tiny run whose step records reach the store; engine failures that end in a message;
// attaching over a local socket, refused connections and wrong tokens; a recipe switch
// sent from the GUI and recorded as an event; a kernel name that appears during the run
// in the kernel table; the trace file and the live run driven alike through DataSource.
#include <QDir>
#include <QFile>
#include <QProcess>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>

#include "fp8/training_recipe.h"
#include "live_server.h"
#include "models/display_names.h"
#include "models/engine_process.h"
#include "models/kernel_stats_model.h"
#include "models/live_source.h"
#include "models/trace_file_loader.h"
#include "synthetic_trace.h"
#include "trace_reader.h"
#include "trace_file.h"

using namespace fp8scope;
using namespace fp8scope::views;

namespace {
std::size_t steps_of(const SeriesStore& s, int run) {
    return s.read([run](const TraceData& d) { return run < int(d.runs.size()) ? d.runs[run].steps.size() : 0; });
}

// Name -> calls of the kernel table of one step.
std::map<QString, int> kernel_calls(const SeriesStore& store, int run, std::int64_t step) {
    KernelStatsModel m(&store);
    m.refresh(run, step);
    std::map<QString, int> out;
    for (int r = 0; r < m.rowCount(); ++r) {
        const QString name = m.data(m.index(r, KernelStatsModel::Name), Qt::DisplayRole).toString();
        out[name] = m.data(m.index(r, KernelStatsModel::Calls), Qt::DisplayRole).toInt();
    }
    return out;
}

// Starts `source` and checks it through the interface the app uses: opened() with its
// name, the synthetic trace's steps in the store, no failure.
void expectSynthetic(DataSource& source, const std::function<void()>& start, const QString& name,
                     const SeriesStore& store, std::size_t steps) {
    QSignalSpy opened(&source, &DataSource::opened), failed(&source, &DataSource::failed);
    start();
    QTRY_COMPARE_WITH_TIMEOUT(opened.count(), 1, 10000);
    QCOMPARE(opened.at(0).at(0).toString(), name);
    QTRY_COMPARE_WITH_TIMEOUT(steps_of(store, 2), steps, 10000);
    QCOMPARE(store.read([](const TraceData& d) { return d.runs[1].steps[&trace::StepRecord::loss][7]; }),
             testing::loss_of(1, 7));
    QVERIFY(source.wait(10000));
    QCOMPARE(failed.count(), 0);
}
}  // namespace

class LiveTest : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;

private slots:
    void commandLine() {
        LaunchSpec s;
        s.config = "tiny.json";
        s.recipes = {"baseline", "mxfp8"};
        s.steps = 12;
        s.capture_every = 3;
        s.out = "/tmp/x.h5";
        s.socket = "unix:/tmp/x.sock";
        const QStringList a = s.arguments();
        QCOMPARE(a.first(), QString("train"));
        QCOMPARE(a[a.indexOf("--config") + 1], QString("tiny.json"));
        QCOMPARE(a[a.indexOf("--compare") + 1], QString("baseline,mxfp8"));
        QCOMPARE(a[a.indexOf("--steps") + 1], QString("12"));
        QCOMPARE(a[a.indexOf("--capture-every") + 1], QString("3"));
        QCOMPARE(a[a.indexOf("--out") + 1], QString("/tmp/x.h5"));
        QCOMPARE(a[a.indexOf("--listen") + 1], QString("unix:/tmp/x.sock"));
        QVERIFY(!a.contains("--recipe") && !a.contains("--token"));
        QCOMPARE(a[a.indexOf("--device") + 1], QString("cpu"));
        s.device = "cuda";
        QCOMPARE(s.arguments()[s.arguments().indexOf("--device") + 1], QString("cuda"));
        s.recipes = {"delayed"};
        QCOMPARE(s.arguments()[s.arguments().indexOf("--recipe") + 1], QString("delayed"));
        QVERIFY(!s.arguments().contains("--nproc-per-node"));  // one process: the engine's default
        s.nproc_per_node = 4;
        const QStringList dp = s.arguments();
        QCOMPARE(dp.count("--nproc-per-node"), 1);
        QCOMPARE(dp[dp.indexOf("--nproc-per-node") + 1], QString("4"));
        QCOMPARE(dp.first(), QString("train"));
    }

    // A PyTorch capture folder: the engine imports it and follows the run (import --follow);
    // the GUI opens the trace as it appears, as a launched run's.
    void importsACaptureFolder() {
        const QString cap = dir_.filePath("capture");
        QVERIFY(QDir().mkpath(cap + "/step_000001"));
        // One linear (2 in, 1 out) at step 1: x (1, 2), w (1, 2), dy (1, 1), F32.
        const QByteArray header = R"({"l.x":{"dtype":"F32","shape":[1,2],"data_offsets":[0,8]},)"
                                  R"("l.w":{"dtype":"F32","shape":[1,2],"data_offsets":[8,16]},)"
                                  R"("l.dy":{"dtype":"F32","shape":[1,1],"data_offsets":[16,20]}})";
        const float values[] = {1.5f, -2.0f, 0.25f, 0.5f, 1e-3f};
        QFile st(cap + "/step_000001/l.safetensors");
        QVERIFY(st.open(QIODevice::WriteOnly));
        const quint64 n = quint64(header.size());
        QByteArray len(8, '\0');
        for (int i = 0; i < 8; ++i) len[i] = char((n >> (8 * i)) & 0xFF);
        st.write(len + header + QByteArray(reinterpret_cast<const char*>(values), sizeof values));
        st.close();
        QFile m(cap + "/manifest.json");
        QVERIFY(m.open(QIODevice::WriteOnly));
        m.write(R"({"format":"fp8scope-torch-capture","version":1,"every":1,"complete":true,
            "linears":[{"name":"blocks.0.l","layer":0,"in_features":2,"out_features":1}],
            "steps":[{"step":1,"loss":2.5,"step_ms":3.0,"captured":true}],
            "tensors":[{"step":1,"linear":"blocks.0.l","operand":"x","name":"l.x","file":"step_000001/l.safetensors","dtype":"F32","shape":[1,2]},
                       {"step":1,"linear":"blocks.0.l","operand":"w","name":"l.w","file":"step_000001/l.safetensors","dtype":"F32","shape":[1,2]},
                       {"step":1,"linear":"blocks.0.l","operand":"dy","name":"l.dy","file":"step_000001/l.safetensors","dtype":"F32","shape":[1,1]}]})");
        m.close();
        QCOMPARE(capture_folder(cap), QDir(cap).absolutePath());
        QCOMPARE(capture_folder(cap + "/manifest.json"), QDir(cap).absolutePath());
        QVERIFY(capture_folder(dir_.path()).isEmpty());  // no manifest
        QVERIFY(capture_folder(cap + "/step_000001/l.safetensors").isEmpty());

        LaunchSpec s;
        s.import_dir = capture_folder(cap);
        s.out = dir_.filePath("imported.h5");
        QCOMPARE(s.arguments(), (QStringList{"import", s.import_dir, "--out", s.out, "--device", "cpu", "--follow"}));
        EngineProcess e;
        QSignalSpy ready(&e, &EngineProcess::traceReady), finished(&e, &EngineProcess::finished);
        QVERIFY(e.start(s, FP8SCOPE_ENGINE));
        QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 30000);  // the capture is complete: import ends
        QCOMPARE(ready.count(), 1);
        const fp8scope::trace::TraceReader r(s.out.toStdString());
        QCOMPARE(r.meta().linears.at(0).name, std::string("blocks.0.l"));
        QCOMPARE(r.steps(0).at(0).loss, 2.5);
        QCOMPARE(r.operands(0, 1).size(), std::size_t(6));  // x, w, dy as their two GEMMs read them
    }

    // The GUI offers core's recipes, and its default lock-step set is made of them.
    void recipeNamesComeFromCore() {
        const QStringList names = LaunchSpec::recipeNames();
        QCOMPARE(names.size(), qsizetype(training_recipe_names().size()));
        for (const std::string& n : training_recipe_names()) QVERIFY(names.contains(QString::fromStdString(n)));
        QVERIFY(LaunchSpec::kDefaultLockStep.size() > 1);
        for (const QString& r : LaunchSpec::kDefaultLockStep) QVERIFY2(names.contains(r), qPrintable(r));
        QCOMPARE(LaunchSpec{}.recipes, LaunchSpec::kDefaultLockStep);
    }

    void missingEngineBinary() {
        EngineProcess e;
        QSignalSpy failed(&e, &EngineProcess::failed);
        QVERIFY(!e.start(LaunchSpec{}, dir_.filePath("no-such-engine")));
        QCOMPARE(failed.count(), 1);
        QVERIFY(failed.at(0).at(0).toString().contains("no engine binary"));
    }

    void engineErrorExitIsReported() {
        LaunchSpec s;
        s.data = "text:" + dir_.filePath("missing-corpus.txt");
        s.out.clear();
        EngineProcess e;
        QSignalSpy failed(&e, &EngineProcess::failed);
        QVERIFY(e.start(s, FP8SCOPE_ENGINE));
        QTRY_COMPARE_WITH_TIMEOUT(failed.count(), 1, 20000);
        const QString msg = failed.at(0).at(0).toString();
        QVERIFY2(msg.contains("exited with status") && msg.contains("error"), qPrintable(msg));
        QVERIFY(!e.running());
    }

    void launchedTinyRunReachesTheStore() {
        LaunchSpec s;
        s.config = FP8SCOPE_SOURCE_DIR "/resources/configs/tiny.json";
        s.recipes = {"baseline", "delayed"};
        s.steps = 30;
        s.capture_every = 5;
        s.out = dir_.filePath("tiny.h5");
        SeriesStore store;
        TraceFileLoader loader(&store);
        EngineProcess e;
        QSignalSpy finished(&e, &EngineProcess::finished), failed(&e, &EngineProcess::failed);
        connect(&e, &EngineProcess::traceReady, &loader, [&](const QString& p) {
            loader.openGrowing(p);
            loader.setFollowing(true, 50);
        });
        QVERIFY(e.start(s, FP8SCOPE_ENGINE));
        QTRY_VERIFY_WITH_TIMEOUT(steps_of(store, 1) > 0, 60000);  // while it trains
        QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 120000);
        QCOMPARE(failed.count(), 0);
        QTRY_COMPARE_WITH_TIMEOUT(steps_of(store, 1), std::size_t(30), 10000);
        store.read([](const TraceData& d) {
            QCOMPARE(d.runs[0].info.recipe, std::string("baseline"));
            // Steps count from 1; the first step is a capture step, then every 5th.
            QVERIFY(d.runs[1].capture_steps.size() >= 2);
            QCOMPARE(d.runs[1].capture_steps[0], 1);
            QCOMPARE(d.runs[1].capture_steps[1] - d.runs[1].capture_steps[0], 5);
            const double loss = d.runs[0].steps[&trace::StepRecord::loss].back();
            QVERIFY(std::isfinite(loss) && loss > 0);
        });
    }

    void attachWhereNothingListens() {
        SeriesStore store;
        LiveSource live(&store);
        QSignalSpy failed(&live, &LiveSource::failed);
        live.attach("unix:" + dir_.filePath("nobody.sock"), QString());
        QTRY_COMPARE_WITH_TIMEOUT(failed.count(), 1, 10000);
        QVERIFY(failed.at(0).at(1).toString().contains("nobody.sock"));
        QVERIFY(!live.isAttached());
        QVERIFY(store.read([](const TraceData& d) { return d.meta.runs.empty(); }));
    }

    // An in-process engine stand-in: a LiveServer publishing the synthetic trace and
    // answering a recipe switch with the event the trainer records.
    void attachSwitchAndWrongToken() {
        testing::SyntheticSpec spec;
        spec.steps = 20;
        const std::string sock = dir_.filePath("engine.sock").toStdString();
        live::LiveServer* server_ptr = nullptr;
        live::LiveServer server(live::parse_endpoint("unix:" + sock), "secret", testing::synthetic_meta(spec),
                                [&](const live::Command& c) {
                                    if (c.kind != live::CommandKind::SwitchRecipe) return live::CommandReply{false, "not now"};
                                    server_ptr->publish(trace::EventRecord{c.run, 19, trace::EventKind::RecipeSwitch,
                                                                           "delayed -> " + c.recipe});
                                    return live::CommandReply{true, ""};
                                });
        server_ptr = &server;
        const TraceBatch b = testing::synthetic_batch(spec);
        for (const auto& r : b.steps) server.publish(r);

        SeriesStore store;
        LiveSource wrong(&store);
        QSignalSpy refused(&wrong, &LiveSource::failed);
        wrong.attach(QString::fromStdString("unix:" + sock), "guess");
        QTRY_COMPARE_WITH_TIMEOUT(refused.count(), 1, 10000);
        QVERIFY(refused.at(0).at(1).toString().contains("token"));

        LiveSource live(&store);
        QSignalSpy attached(&live, &LiveSource::opened), replied(&live, &LiveSource::replied);
        live.attach(QString::fromStdString("unix:" + sock), "secret");
        QTRY_COMPARE_WITH_TIMEOUT(attached.count(), 1, 10000);
        QTRY_COMPARE_WITH_TIMEOUT(steps_of(store, 2), std::size_t(20), 10000);
        QCOMPARE(store.read([](const TraceData& d) { return d.runs[1].steps[&trace::StepRecord::loss][7]; }),
                 testing::loss_of(1, 7));

        live::Command c;
        c.kind = live::CommandKind::SwitchRecipe;
        c.run = 1;
        c.recipe = "mxfp8";
        live.send(c, "switch");
        QTRY_COMPARE_WITH_TIMEOUT(replied.count(), 1, 10000);
        QVERIFY(replied.at(0).at(1).toBool());
        QTRY_VERIFY_WITH_TIMEOUT(store.read([](const TraceData& d) {
            for (const auto& e : d.events)
                if (e.kind == trace::EventKind::RecipeSwitch && e.run == 1 && e.detail == "delayed -> mxfp8") return true;
            return false;
        }), 10000);
        // The run goes by its new recipe from then on, as the engine's final table names it.
        QCOMPARE(store.read([](const TraceData& d) { return run_label(d.meta, 1); }),
                 QString::fromUtf8("delayed \u2192 mxfp8 @ step 19"));
        live.send(live::Command{live::CommandKind::Pause, -1, "", 0}, "pause");
        QTRY_COMPARE_WITH_TIMEOUT(replied.count(), 2, 10000);
        QVERIFY(!replied.at(1).at(1).toBool());
        QCOMPARE(replied.at(1).at(2).toString(), QString("not now"));
    }

    // A kernel name the engine learns during the run: a source attached before it gets
    // the name on the stream, one attached after finds it in the metadata.
    void lateKernelNameInTheKernelTable() {
        testing::SyntheticSpec spec;
        const trace::TraceMeta meta = testing::synthetic_meta(spec);
        const auto gemm_id = static_cast<std::int32_t>(meta.ops.size());
        const std::string sock = dir_.filePath("names.sock").toStdString();
        live::LiveServer server(live::parse_endpoint("unix:" + sock), "", meta, nullptr);
        const QString endpoint = QString::fromStdString("unix:" + sock);

        SeriesStore before_store;
        LiveSource before(&before_store);
        QSignalSpy attached(&before, &LiveSource::opened);
        before.attach(endpoint, QString());
        QTRY_COMPARE_WITH_TIMEOUT(attached.count(), 1, 10000);
        server.publish(trace::OpNameRecord{gemm_id, "sm90_gemm_e4m3"});
        for (std::int64_t t : {0, 5000, 9000}) server.publish(trace::OpRecord{0, 3, gemm_id, 1, 0, 0, 7, t, t + 4000});
        server.publish(trace::OpRecord{0, 3, 0, 1, 0, -1, 0, 100, 600});
        // A step with device records lists its kernels (the host op is their context).
        const std::map<QString, int> expected{{"sm90_gemm_e4m3", 3}};
        QTRY_COMPARE_WITH_TIMEOUT(kernel_calls(before_store, 0, 3), expected, 10000);

        SeriesStore after_store;
        LiveSource after(&after_store);
        after.attach(endpoint, QString());
        QTRY_COMPARE_WITH_TIMEOUT(after_store.read([](const TraceData& d) { return d.meta.ops.size(); }),
                                  meta.ops.size() + 1, 10000);
        server.publish(trace::OpRecord{0, 4, gemm_id, 1, 0, 0, 7, 0, 4000});
        const std::map<QString, int> one{{"sm90_gemm_e4m3", 1}};
        QTRY_COMPARE_WITH_TIMEOUT(kernel_calls(after_store, 0, 4), one, 10000);
        QTRY_COMPARE_WITH_TIMEOUT(kernel_calls(before_store, 0, 4), one, 10000);
    }

    // A trace file and a live run filling one store through the one interface: the newer
    // source's trace wins, a stale source's batches are dropped (the file grew after the
    // live run took over), and a closed source delivers nothing more.
    void bothSourcesThroughTheInterface() {
        testing::SyntheticSpec spec;
        spec.steps = 25;
        const QString file = dir_.filePath("interface.h5");
        trace::TraceWriter writer(file.toStdString(), testing::synthetic_meta(spec));
        testing::write_synthetic_steps(writer, spec, 0, 20);
        writer.flush();
        const std::string sock = dir_.filePath("interface.sock").toStdString();
        const QString endpoint = QString::fromStdString("unix:" + sock);
        live::LiveServer server(live::parse_endpoint("unix:" + sock), "", testing::synthetic_meta(spec), nullptr);
        for (const auto& r : testing::synthetic_batch(spec).steps)
            if (r.step < 10) server.publish(r);  // fewer than the file: the store shows whose trace it holds

        SeriesStore store;
        TraceFileLoader loader(&store);
        LiveSource live(&store);
        expectSynthetic(loader, [&] { loader.open(file); }, file, store, 20);
        expectSynthetic(live, [&] { live.attach(endpoint, QString()); }, endpoint, store, 10);

        QSignalSpy grew(&loader, &TraceFileLoader::grew);
        testing::write_synthetic_steps(writer, spec, 20, 25);
        writer.flush();
        loader.poll();
        QVERIFY(loader.wait(10000));
        QCoreApplication::processEvents();
        QCOMPARE(grew.count(), 0);
        QCOMPARE(steps_of(store, 2), std::size_t(10));

        DataSource& source = live;
        source.close();
        server.publish(trace::StepRecord{2, 10, 1.0});
        QTest::qWait(300);
        QCOMPARE(steps_of(store, 2), std::size_t(10));
        writer.close();
    }
};

QTEST_GUILESS_MAIN(LiveTest)
#include "test_live.moc"
