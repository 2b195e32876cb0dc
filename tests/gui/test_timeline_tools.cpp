// The timeline tools on a two-run lock-step trace whose every time is chosen by hand: one
// linear (blocks.0.mlp.fc1), a baseline run and an FP8 run, steps 1 and 2. Each run's step
// has host ops (a layernorm forward and backward with the same tags, the FP8 run's casts
// of x, w and dy, fprop, dgrad, wgrad) and the kernels they launched, plus a copy with no
// op. Checked: which op launched which kernel, the Chrome/Perfetto export parsed back (short
// names with the full one in args, flows, counters), the per-op comparison of the two
// runs, the FP8 worth figures and the Kernels view's flows, strip and table.
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTableView>
#include <QTest>
#include <cmath>
#include <map>

#include "kernel_launches.h"
#include "models/chrome_trace.h"
#include "models/fp8_worth.h"
#include "models/op_time_comparison.h"
#include "models/series_store.h"
#include "models/selection.h"
#include "models/step_cursor.h"
#include "models/table_csv.h"
#include "widgets/counter_strip.h"
#include "widgets/fp8_worth_view.h"
#include "widgets/kernel_view.h"
#include "widgets/timeline_widget.h"

using namespace fp8scope;
using namespace fp8scope::views;

namespace {

// Op ids: host ops, then kernel names.
enum : int { Fprop, Dgrad, Wgrad, Quantize, Layernorm, BaseGemm, Fp8Gemm, Cast, NormFwd, NormBwd, HtoD };
const char* kBaseGemm = "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT";
const char* kFp8Gemm = "nvjet_sm90_qqtst_128x128_128x6_2x1_v_bz_coopA_algo2_bias_TNT";
const char* kCast = "fp8scope::cuda::qk::cast_block_kernel<unsigned short, (fp8scope::Format)0, (fp8scope::cuda::qk::BlockShape)0>";

trace::TraceMeta meta() {
    trace::TraceMeta m;
    m.tool_version = "test";
    m.runs = {{"base", "baseline"}, {"fp8", "current"}};
    m.baseline_run = 0;
    m.linears = {{"blocks.0.mlp.fc1", 0, 64, 128}};
    m.quantizers = {"current_e4m3"};
    m.training_recipes = {"baseline", "current"};
    m.config_json = R"({"batch_size": 4, "seq_len": 8})";
    m.ops = {"fprop", "dgrad", "wgrad", "quantize", "layernorm", kBaseGemm, kFp8Gemm, kCast,
             "fp8scope::cuda::(anonymous namespace)::norm_forward_rows_kernel<1, true>",
             "fp8scope::cuda::(anonymous namespace)::norm_backward_rows_kernel<1, true>", "memcpy HtoD"};
    return m;
}

trace::OpRecord rec(int run, std::int64_t step, int op, std::int64_t start, std::int64_t end, int device, int parent = -1,
                    int linear = -1, int operand = -1) {
    trace::OpRecord r;
    r.run = device < 0 || parent >= 0 ? run : 0;  // a device record with no op comes with run 0
    r.step = step;
    r.op = op;
    r.linear = linear;
    r.layer = 0;
    r.device = device;
    r.stream = device < 0 ? 0 : 7;
    r.kind = device < 0 ? trace::OpKind::Host : trace::OpKind::Kernel;
    r.start_ns = start;
    r.end_ns = end;
    r.parent = parent;
    r.operand = operand;
    return r;
}

// Kernel durations (ns): the baseline's GEMMs; the FP8 run's GEMMs and casts of x, w, dy.
// Step 2's baseline fprop takes 8000 instead of 6000.
std::int64_t base_gemm(int gemm, std::int64_t step) { return gemm == 0 ? (step == 1 ? 6000 : 8000) : gemm == 1 ? 5000 : 4000; }
const std::int64_t kFp8Gemm_ns[3] = {2000, 3000, 1000}, kCast_ns[3] = {400, 600, 1000};

// One run's step at offset o = step * 100000 + run * 50000. Host ops: layernorm [o, o+1000],
// casts x [o+1000..], w [o+2000..], fprop [o+3000..], cast dy [o+9000..], dgrad [o+10000..],
// wgrad [o+11000..], layernorm backward [o+12000..], each 1000 long. Kernels: the copy at
// o+1400, norm forward [o+1500, o+2500], casts x at o+2500 and w at o+3000, fprop's GEMM at
// o+4000, cast dy at o+10000, dgrad's GEMM at o+13000, wgrad's at o+19000, norm backward
// [o+24000, o+25000].
void add_step(std::vector<trace::OpRecord>& ops, int run, std::int64_t step) {
    const std::int64_t o = step * 100000 + run * 50000;
    const bool fp8 = run == 1;
    ops.push_back(rec(run, step, Layernorm, o, o + 1000, -1));
    if (fp8) {
        ops.push_back(rec(run, step, Quantize, o + 1000, o + 2000, -1, -1, 0, 0));
        ops.push_back(rec(run, step, Quantize, o + 2000, o + 3000, -1, -1, 0, 1));
    }
    ops.push_back(rec(run, step, Fprop, o + 3000, o + 4000, -1, -1, 0));
    if (fp8) ops.push_back(rec(run, step, Quantize, o + 9000, o + 10000, -1, -1, 0, 2));
    ops.push_back(rec(run, step, Dgrad, o + 10000, o + 11000, -1, -1, 0));
    ops.push_back(rec(run, step, Wgrad, o + 11000, o + 12000, -1, -1, 0));
    ops.push_back(rec(run, step, Layernorm, o + 12000, o + 13000, -1));
    ops.push_back(rec(run, step, HtoD, o + 1400, o + 1450, 0));
    ops.push_back(rec(run, step, NormFwd, o + 1500, o + 2500, 0, Layernorm));
    const int gemm_kernel = fp8 ? Fp8Gemm : BaseGemm;
    const std::int64_t gemm_at[3] = {o + 4000, o + 13000, o + 19000};
    for (int g = 0; g < 3; ++g) {
        const std::int64_t d = fp8 ? kFp8Gemm_ns[g] : base_gemm(g, step);
        ops.push_back(rec(run, step, gemm_kernel, gemm_at[g], gemm_at[g] + d, 0, Fprop + g, 0));
    }
    if (fp8) {
        const std::int64_t cast_at[3] = {o + 2500, o + 3000, o + 10000};
        for (int x = 0; x < 3; ++x) ops.push_back(rec(run, step, Cast, cast_at[x], cast_at[x] + kCast_ns[x], 0, Quantize, 0, x));
    }
    ops.push_back(rec(run, step, NormBwd, o + 24000, o + 25000, 0, Layernorm));
}

double loss_of(int run, std::int64_t step) { return 5.0 - 0.5 * static_cast<double>(step) - 0.1 * run; }

// The FP8 run's operand SQNRs at capture step 1, by slot order (fprop x, w; dgrad dy, w;
// wgrad dy, x) and fprop's output SQNR.
const std::map<std::pair<Gemm, Operand>, double> kSqnr = {
    {{Gemm::Fprop, Operand::X}, 30}, {{Gemm::Fprop, Operand::W}, 35}, {{Gemm::Dgrad, Operand::DY}, 20},
    {{Gemm::Dgrad, Operand::W}, 36}, {{Gemm::Wgrad, Operand::DY}, 21}, {{Gemm::Wgrad, Operand::X}, 31}};

TraceBatch batch() {
    TraceBatch b;
    for (int run : {0, 1})
        for (std::int64_t step : {1, 2}) {
            b.steps.push_back({run, step, loss_of(run, step), NAN, 1e-3 * static_cast<double>(step), 1.0, 1.0, 1e4, run});
            trace::ScalingRecord s{run, step, {}, {}};
            for (int slot = 0; slot < 6; ++slot) {
                s.amax.push_back(static_cast<float>(slot + 10 * step + run));
                s.scale.push_back(run == 1 ? 448.0f / s.amax.back() : NAN);
            }
            b.scaling.push_back(s);
            add_step(b.ops, run, step);
        }
    for (const auto& [key, db] : kSqnr) {
        trace::OperandRecord o;
        o.key = {1, 1, 0, key.first, key.second};
        o.quantizer_in_use = 0;
        o.errors.resize(1);
        o.errors[0].sqnr_db = db;
        b.operands.push_back(o);
    }
    trace::GemmErrorRecord g;
    g.run = 1;
    g.step = 1;
    g.linear = 0;
    g.gemm = Gemm::Fprop;
    g.sqnr_db = 25;
    b.gemm_errors.push_back(g);
    std::stable_sort(b.ops.begin(), b.ops.end(), [](const auto& x, const auto& y) { return x.step < y.step; });
    return b;
}

}  // namespace

class TimelineToolsTest : public QObject {
    Q_OBJECT
    SeriesStore store_;

private slots:
    void init() { QVERIFY(store_.append(store_.reset(meta()), batch())); }

    void launchers() {
        std::vector<trace::OpRecord> ops;
        add_step(ops, 1, 1);
        const auto l = trace::launching_ops(ops);
        // Host ops in add_step's order: 0 layernorm, 1 cast x, 2 cast w, 3 fprop, 4 cast dy,
        // 5 dgrad, 6 wgrad, 7 layernorm backward; then the copy, norm forward, the three
        // GEMMs, the three casts and norm backward.
        const std::vector<std::ptrdiff_t> want = {-1, -1, -1, -1, -1, -1, -1, -1, -1, 0, 3, 5, 6, 1, 2, 4, 7};
        QCOMPARE(l, want);
    }

    void readableNamesInTheExport() {
        const QJsonArray events = QJsonDocument::fromJson(store_.read([](const TraceData& d) {
                                      return chrome_trace_json(d, 1, 1, 2);
                                  })).object()["traceEvents"].toArray();
        std::map<QString, QString> names;  // short -> full
        for (const auto& v : events) {
            const QJsonObject e = v.toObject();
            if (e["ph"] == "X" && e["cat"] == "kernel") names[e["name"].toString()] = e["args"].toObject()["kernel"].toString();
        }
        QCOMPARE(names["cuBLASLt GEMM e4m3 x e4m3 -> bf16 128x128x128 +bias"], QString(kFp8Gemm));
        QCOMPARE(names["cast_block<bf16, e4m3, per-tensor>"], QString(kCast));
        QCOMPARE(names["norm_forward_rows<1, true>"], QString("fp8scope::cuda::(anonymous namespace)::norm_forward_rows_kernel<1, true>"));
        QCOMPARE(names["memcpy HtoD"], QString("memcpy HtoD"));
        QCOMPARE(int(names.size()), 5);
    }

    void flowsInTheExport() {
        const QJsonArray events = QJsonDocument::fromJson(store_.read([](const TraceData& d) {
                                      return chrome_trace_json(d, 1, 1, 2);
                                  })).object()["traceEvents"].toArray();
        // Slices by (pid, ts): the flow's ends must land on the op's and the kernel's starts.
        std::map<std::pair<int, double>, QString> slices;
        std::map<int, QJsonObject> starts, finishes;
        for (const auto& v : events) {
            const QJsonObject e = v.toObject();
            if (e["ph"] == "X") slices[{e["pid"].toInt(), e["ts"].toDouble()}] = e["name"].toString();
            if (e["ph"] == "s") starts[e["id"].toInt()] = e;
            if (e["ph"] == "f") finishes[e["id"].toInt()] = e;
        }
        // Per step 8 launched kernels (norm fwd, 3 GEMMs, 3 casts, norm bwd); the copy has no op.
        QCOMPARE(int(starts.size()), 16);
        QCOMPARE(int(finishes.size()), 16);
        std::map<QString, int> pairs;  // "op -> kernel"
        for (const auto& [id, s] : starts) {
            const QJsonObject f = finishes.at(id);
            QCOMPARE(f["bp"].toString(), QString("e"));
            QCOMPARE(s["cat"].toString(), QString("launch"));
            QCOMPARE(s["pid"].toInt(), 1000);  // run 1's CPU
            QCOMPARE(f["pid"].toInt(), 1001);  // its GPU 0
            QCOMPARE(f["tid"].toInt(), 7);
            const auto op = slices.find({s["pid"].toInt(), s["ts"].toDouble()});
            const auto k = slices.find({f["pid"].toInt(), f["ts"].toDouble()});
            QVERIFY(op != slices.end() && k != slices.end());
            ++pairs[op->second + " -> " + k->second];
        }
        QCOMPARE(pairs["layernorm -> norm_forward_rows<1, true>"], 2);
        QCOMPARE(pairs["layernorm -> norm_backward_rows<1, true>"], 2);
        QCOMPARE(pairs["fprop -> cuBLASLt GEMM e4m3 x e4m3 -> bf16 128x128x128 +bias"], 2);
        QCOMPARE(pairs["quantize -> cast_block<bf16, e4m3, per-tensor>"], 6);
        // Times: the origin is the earliest record, step 1 of run 1 at 150000 ns; the fprop's
        // GEMM at 150000 + 4000 ns (4 µs), its host op at 3 µs.
        bool found = false;
        for (const auto& [id, s] : starts)
            if (s["ts"].toDouble() == 3.0) found = finishes.at(id)["ts"].toDouble() == 4.0;
        QVERIFY(found);
    }

    void countersInTheExport() {
        const QJsonArray events = QJsonDocument::fromJson(store_.read([](const TraceData& d) {
                                      return chrome_trace_json(d, 1, 1, 2, {{0, Gemm::Dgrad, Operand::DY}});
                                  })).object()["traceEvents"].toArray();
        std::map<QString, std::vector<std::pair<double, double>>> counters;
        for (const auto& v : events) {
            const QJsonObject e = v.toObject();
            if (e["ph"] == "C") {
                QCOMPARE(e["pid"].toInt(), 1000);
                counters[e["name"].toString()].emplace_back(e["ts"].toDouble(), e["args"].toObject()["value"].toDouble());
            }
        }
        QCOMPARE(int(counters.size()), 4);
        // Each step's value at its first record: step 1 at 0 µs, step 2 at 100 µs.
        using P = std::vector<std::pair<double, double>>;
        QCOMPARE(counters["loss"], (P{{0.0, loss_of(1, 1)}, {100.0, loss_of(1, 2)}}));
        QCOMPARE(counters["learning rate"], (P{{0.0, 1e-3}, {100.0, 2e-3}}));
        // dgrad dy is slot 2: amax 2 + 10 step + 1, scale 448 / amax (float).
        QCOMPARE(counters["amax L0 fc1 dgrad dy"], (P{{0.0, 13.0}, {100.0, 23.0}}));
        QCOMPARE(counters["scale L0 fc1 dgrad dy"], (P{{0.0, double(448.0f / 13.0f)}, {100.0, double(448.0f / 23.0f)}}));
        // The baseline's scale is NaN (no FP8): its track is left out.
        const QJsonArray base = QJsonDocument::fromJson(store_.read([](const TraceData& d) {
                                    return chrome_trace_json(d, 0, 1, 2, {{0, Gemm::Dgrad, Operand::DY}});
                                })).object()["traceEvents"].toArray();
        int scales = 0;
        for (const auto& v : base) scales += v.toObject()["name"].toString().startsWith("scale ");
        QCOMPARE(scales, 0);
    }

    void perOpComparison() {
        const auto rows = store_.read([](const TraceData& d) { return op_time_comparison(d, 0, 1, 2); });
        std::map<QString, std::pair<double, double>> by_op;
        for (const auto& r : rows) by_op[r.op] = {r.a_us, r.b_us};
        QCOMPARE(rows[0].op, QString("total"));
        // Baseline step 2: GEMMs 8 + 5 + 4 µs, norms 1 + 1, copy 0.05. FP8: GEMMs 2 + 3 + 1,
        // casts 0.4 + 0.6 + 1, norms 2, copy 0.05.
        QCOMPARE(rows[0].a_us, 8.0 + 5 + 4 + 2 + 0.05);
        QCOMPARE(rows[0].b_us, 2.0 + 3 + 1 + 0.4 + 0.6 + 1 + 2 + 0.05);
        QCOMPARE(by_op["blocks.0.mlp.fc1 fprop"], std::make_pair(8.0, 2.0));
        QCOMPARE(by_op["blocks.0.mlp.fc1 wgrad"], std::make_pair(4.0, 1.0));
        QCOMPARE(by_op["blocks.0.mlp.fc1 quantize dy"], std::make_pair(0.0, 1.0));
        QCOMPARE(by_op["layernorm"], std::make_pair(2.0, 2.0));
        QCOMPARE(by_op["no op"], std::make_pair(0.05, 0.05));
        QCOMPARE(rows[1].op, QString("blocks.0.mlp.fc1 fprop"));  // saves the most
        QCOMPARE(rows[1].saved_pct(), 75.0);
        QCOMPARE(rows.back().op, QString("blocks.0.mlp.fc1 quantize dy"));  // costs the most
    }

    void fp8Worth() {
        const Fp8Worth w = store_.read([](const TraceData& d) { return fp8_worth(d, 0, 1, 2); });
        QCOMPARE(w.steps, (std::vector<std::int64_t>{1, 2}));
        QCOMPARE(int(w.rows.size()), 3);
        // fprop: FP8 2 + x/2 0.2 + w/2 0.3 = 2.5 µs; baseline 6 and 8: saved 3.5 and 5.5.
        const Fp8WorthRow &f = w.rows[0], &dg = w.rows[1], &wg = w.rows[2];
        QCOMPARE(f.label, QString("L0 fc1 fprop"));
        QCOMPARE(f.base_us, 7.0);
        QCOMPARE(f.fp8_us, 2.5);
        QCOMPARE(f.cast_us, 0.5);
        QCOMPARE(f.saved_us, 4.5);
        QCOMPARE(f.sqnr_db, 25.0);  // the GEMM output's
        QVERIFY(f.output_error);
        QCOMPARE(f.error_step, std::int64_t(1));
        // dgrad: 3 + dy/2 0.5 + w/2 0.3 = 3.8 against 5; error: the worse of dy 20, w 36.
        QCOMPARE(dg.fp8_us, 3.8);
        QCOMPARE(dg.saved_us, 5.0 - 3.8);
        QCOMPARE(dg.sqnr_db, 20.0);
        QVERIFY(!dg.output_error);
        // wgrad: 1 + dy/2 0.5 + x/2 0.2 = 1.7 against 4; the worse of dy 21, x 31.
        QCOMPARE(wg.fp8_us, 1.7);
        QCOMPARE(wg.saved_us, 4.0 - 1.7);
        QCOMPARE(wg.sqnr_db, 21.0);
        // The three GEMMs' FP8 times add up to the linear's kernels: GEMMs and casts.
        QCOMPARE(f.fp8_us + dg.fp8_us + wg.fp8_us, 2.0 + 3 + 1 + 0.4 + 0.6 + 1);
    }

    void cpuRunsTimedByHostOps() {
        // No device record: the ops' own times (each host op here lasts 1 µs).
        TraceBatch b = batch();
        std::erase_if(b.ops, [](const trace::OpRecord& r) { return r.device >= 0; });
        QVERIFY(store_.append(store_.reset(meta()), b));
        const Fp8Worth w = store_.read([](const TraceData& d) { return fp8_worth(d, 0, 1, 2); });
        QCOMPARE(w.steps, (std::vector<std::int64_t>{1, 2}));
        // fprop: the baseline's 1 against 1 + half the casts of x and w (0.5 + 0.5).
        QCOMPARE(w.rows[0].base_us, 1.0);
        QCOMPARE(w.rows[0].fp8_us, 2.0);
        QCOMPARE(w.rows[0].cast_us, 1.0);
        QCOMPARE(w.rows[0].saved_us, -1.0);
        const auto rows = store_.read([](const TraceData& d) { return op_time_comparison(d, 0, 1, 1); });
        QCOMPARE(rows[0].a_us, 5.0);  // layernorm twice, fprop, dgrad, wgrad
        QCOMPARE(rows[0].b_us, 8.0);  // and three casts
    }

    void kernelViewFlowsStripAndComparison() {
        StepCursor cursor;
        Selection selection;
        selection.setRun(1);
        KernelView v({&store_, &cursor, &selection});
        v.resize(1200, 900);
        v.show();
        cursor.setRange(1, 2);
        cursor.setStep(2);
        QVERIFY(v.setCounterOperands("L0 fc1 fprop x, L9 nothing").contains("L9 nothing"));
        v.refresh(true);
        const auto& boxes = v.timeline()->boxes();
        int fprop = -1;
        for (int i = 0; i < int(boxes.size()); ++i)
            if (boxes[i].name.startsWith("fprop")) fprop = i;
        QVERIFY(fprop >= 0);
        v.timeline()->selectBox(fprop);
        const auto flows = v.timeline()->shownFlows();
        QCOMPARE(int(flows.size()), 1);
        QVERIFY(boxes[flows[0].second].name.startsWith("cuBLASLt GEMM e4m3 x e4m3 -> bf16 128x128x128 +bias"));
        QCOMPARE(boxes[flows[0].second].detail.section('\n', 0, 0), QString(kFp8Gemm));  // the full name on hover
        // A cast selected: the flows of its op (one cast).
        int cast = -1;
        for (int i = 0; i < int(boxes.size()); ++i)
            if (boxes[i].name.startsWith("cast_block")) cast = i;
        v.timeline()->selectBox(cast);
        QCOMPARE(int(v.timeline()->shownFlows().size()), 1);
        QCOMPARE(v.timeline()->shownFlows()[0].second, cast);
        // The strip: loss, learning rate, amax and scale of fprop x at step 2.
        const auto& tracks = v.counters()->tracks();
        QCOMPARE(int(tracks.size()), 4);
        QCOMPARE(tracks[0].name, QString("loss"));
        QCOMPARE(tracks[0].points.size(), std::size_t(1));
        QCOMPARE(tracks[0].points[0].second, loss_of(1, 2));
        QCOMPARE(tracks[2].name, QString("amax L0 fc1 fprop x"));
        QCOMPARE(tracks[2].points[0].second, 0.0 + 20 + 1);
        // The kernel table's CSV keeps the short name and the full one.
        const QString csv = table_csv(*v.table());
        QVERIFY(csv.contains(QString("cuBLASLt GEMM e4m3 x e4m3 -> bf16 128x128x128 +bias,")));
        QVERIFY(csv.contains(QString(",") + kFp8Gemm + "\n"));
        QVERIFY(csv.contains(QString("\"cast_block<bf16, e4m3, per-tensor>\",")));  // quoted: it holds commas
        QVERIFY(csv.contains(QString(",\"") + kCast + "\"\n"));
        // The comparison: the baseline (compared with by default) against the FP8 run.
        const auto& rows = v.comparison().rows();
        QVERIFY(!rows.empty());
        QCOMPARE(rows[1].op, QString("blocks.0.mlp.fc1 fprop"));
        QCOMPARE(rows[1].a_us, 8.0);
        QCOMPARE(rows[1].b_us, 2.0);
    }

    void fp8WorthView() {
        StepCursor cursor;
        Selection selection;
        Fp8WorthView v({&store_, &cursor, &selection});
        v.resize(900, 700);
        v.show();
        cursor.setRange(1, 2);
        cursor.setStep(2);
        v.refresh(true);  // the baseline selected: the FP8 run against it
        QCOMPARE(v.model().rowCount(), 3);
        QVERIFY(v.noteText().contains("fp8 against base: median over 2 timed steps"));
        QCOMPARE(v.model().data(v.model().index(0, Fp8WorthModel::Saved), Qt::DisplayRole).toString(), QString("4.5"));
        QCOMPARE(v.model().data(v.model().index(1, Fp8WorthModel::ErrorOf), Qt::DisplayRole).toString(), QString("worse operand"));
        // Sorted by time saved, most first: fprop 4.5, wgrad 2.3, dgrad 1.2.
        const QAbstractItemModel* shown = v.tableView()->model();
        QCOMPARE(shown->data(shown->index(0, 0)).toString(), QString("L0 fc1 fprop"));
        QCOMPARE(shown->data(shown->index(1, 0)).toString(), QString("L0 fc1 wgrad"));
        QCOMPARE(shown->data(shown->index(2, 0)).toString(), QString("L0 fc1 dgrad"));
    }
};

QTEST_MAIN(TimelineToolsTest)
#include "test_timeline_tools.moc"
