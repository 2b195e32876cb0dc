// Kernel kinds, attribution and per-step costs without widgets. The kinds are checked on
// every kernel name of a real H200 trace (6 layers x 1024, four runs, 80 steps: the
// names as the trace stores them, cut at 128 characters), each kind read from where the
// kernel is defined in kernels/cuda. Attribution and costs run on a two-run trace whose
// every time is chosen by hand: records with no op inside and between the runs' steps,
// an evaluation block written before the engine recorded an "eval" op, and one with it.
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTest>

#include "models/chrome_trace.h"
#include "models/gemm_shape.h"
#include "models/kernel_attribution.h"
#include "models/kernel_breakdown.h"
#include "models/kernel_kind.h"
#include "models/kernel_stats_model.h"
#include "models/series_store.h"

using namespace fp8scope;
using namespace fp8scope::views;

namespace {

struct NamedKind {
    const char* name;
    KernelKind kind;
};
const NamedKind kH200Kernels[] = {
    {"cub::CUB_300001_SM_900::detail::radix_sort::DeviceRadixSortSingleTileKernel<cub::CUB_300001_SM_900::detail::radix::policy_hub<in", KernelKind::Other},
    {"fp8scope::cuda::(anonymous namespace)::adamw_kernel<4>", KernelKind::Optimizer},
    {"fp8scope::cuda::(anonymous namespace)::column_partials_kernel<8, unsigned short>", KernelKind::Other},
    {"fp8scope::cuda::(anonymous namespace)::dequantize_kernel<(fp8scope::Format)0, true>", KernelKind::Quantize},
    {"fp8scope::cuda::(anonymous namespace)::dwpe_kernel<8>", KernelKind::Other},
    {"fp8scope::cuda::(anonymous namespace)::dwte_kernel<8>", KernelKind::Other},
    {"fp8scope::cuda::(anonymous namespace)::embedding_forward_kernel<8>", KernelKind::Other},
    {"fp8scope::cuda::(anonymous namespace)::f32_to_bf16_kernel", KernelKind::Quantize},
    {"fp8scope::cuda::(anonymous namespace)::iota_kernel", KernelKind::Other},
    {"fp8scope::cuda::(anonymous namespace)::mean_loss_kernel", KernelKind::Other},
    {"fp8scope::cuda::(anonymous namespace)::norm_backward_rows_kernel<1, true>", KernelKind::Other},
    {"fp8scope::cuda::(anonymous namespace)::norm_combine_kernel", KernelKind::Optimizer},
    {"fp8scope::cuda::(anonymous namespace)::norm_forward_rows_kernel<1, true>", KernelKind::Other},
    {"fp8scope::cuda::(anonymous namespace)::softmax_ce_backward_kernel<8>", KernelKind::Other},
    {"fp8scope::cuda::(anonymous namespace)::softmax_ce_forward_kernel<8, true>", KernelKind::Other},
    {"fp8scope::cuda::(anonymous namespace)::sum_squares_kernel<4>", KernelKind::Optimizer},
    {"fp8scope::cuda::(anonymous namespace)::zero_words_kernel", KernelKind::Quantize},
    {"fp8scope::cuda::an::(anonymous namespace)::finish_tiles_kernel", KernelKind::Capture},
    {"fp8scope::cuda::an::(anonymous namespace)::merge_kernel", KernelKind::Capture},
    {"fp8scope::cuda::an::(anonymous namespace)::moments_kernel<float>", KernelKind::Capture},
    {"fp8scope::cuda::an::(anonymous namespace)::moments_kernel<unsigned short>", KernelKind::Capture},
    {"fp8scope::cuda::an::(anonymous namespace)::tile_top_kernel<float, false>", KernelKind::Capture},
    {"fp8scope::cuda::an::(anonymous namespace)::tile_top_kernel<float, true>", KernelKind::Capture},
    {"fp8scope::cuda::an::(anonymous namespace)::tile_top_kernel<unsigned short, false>", KernelKind::Capture},
    {"fp8scope::cuda::an::(anonymous namespace)::tile_top_kernel<unsigned short, true>", KernelKind::Capture},
    {"fp8scope::cuda::an::tile_kernel<float, false>", KernelKind::Capture},
    {"fp8scope::cuda::an::tile_kernel<float, true>", KernelKind::Capture},
    {"fp8scope::cuda::an::tile_kernel<unsigned short, false>", KernelKind::Capture},
    {"fp8scope::cuda::an::tile_kernel<unsigned short, true>", KernelKind::Capture},
    {"fp8scope::cuda::attn::flash_backward_dot_kernel<128>", KernelKind::Attention},
    {"fp8scope::cuda::attn::flash_backward_kv_kernel<128>", KernelKind::Attention},
    {"fp8scope::cuda::attn::flash_backward_q_kernel<128>", KernelKind::Attention},
    {"fp8scope::cuda::attn::flash_forward_kernel<128>", KernelKind::Attention},
    {"fp8scope::cuda::detail::(anonymous namespace)::prepare_kernel", KernelKind::Quantize},
    {"fp8scope::cuda::detail::binary_kernel<8, fp8scope::cuda::(anonymous namespace)::AddOp>", KernelKind::Other},
    {"fp8scope::cuda::detail::binary_kernel<8, fp8scope::cuda::(anonymous namespace)::GeluBackward>", KernelKind::Other},
    {"fp8scope::cuda::detail::sum_partials_kernel<0>", KernelKind::Other},
    {"fp8scope::cuda::detail::unary_kernel<8, fp8scope::cuda::(anonymous namespace)::GeluForward>", KernelKind::Other},
    {"fp8scope::cuda::qk::(anonymous namespace)::tensor_amax_kernel<float>", KernelKind::Quantize},
    {"fp8scope::cuda::qk::(anonymous namespace)::tensor_amax_kernel<unsigned short>", KernelKind::Quantize},
    {"fp8scope::cuda::qk::cast_block_kernel<float, (fp8scope::Format)0, (fp8scope::cuda::qk::BlockShape)0>", KernelKind::Quantize},
    {"fp8scope::cuda::qk::cast_block_kernel<float, (fp8scope::Format)0, (fp8scope::cuda::qk::BlockShape)2>", KernelKind::Quantize},
    {"fp8scope::cuda::qk::cast_block_kernel<float, (fp8scope::Format)0, (fp8scope::cuda::qk::BlockShape)3>", KernelKind::Quantize},
    {"fp8scope::cuda::qk::cast_block_kernel<unsigned short, (fp8scope::Format)0, (fp8scope::cuda::qk::BlockShape)0>", KernelKind::Quantize},
    {"fp8scope::cuda::qk::cast_block_kernel<unsigned short, (fp8scope::Format)0, (fp8scope::cuda::qk::BlockShape)1>", KernelKind::Quantize},
    {"fp8scope::cuda::qk::cast_block_kernel<unsigned short, (fp8scope::Format)0, (fp8scope::cuda::qk::BlockShape)3>", KernelKind::Quantize},
    {"fp8scope::cuda::qk::cast_block_kernel<unsigned short, (fp8scope::Format)1, (fp8scope::cuda::qk::BlockShape)0>", KernelKind::Quantize},
    {"memcpy DtoD", KernelKind::Copy},
    {"memcpy DtoH", KernelKind::Copy},
    {"memcpy HtoD", KernelKind::Copy},
    {"memset", KernelKind::Copy},
    {"nvjet_sm90_qqsss_128x128_128x6_2x1_v_bz_coopA_algo2_Avec128_Bvec128_TNT", KernelKind::Gemm},
    {"nvjet_sm90_qqsss_128x64_128x8_1x2_h_bz_algo2_Avec128_Bvec128_TNT", KernelKind::Gemm},
    {"nvjet_sm90_qqsss_64x192_128x6_2x1_v_bz_coopB_algo2_Avec128_Bvec128_TNT", KernelKind::Gemm},
    {"nvjet_sm90_qqtst_128x128_128x6_2x1_v_bz_coopA_algo2_Ablk128_Bvec128_TNN", KernelKind::Gemm},
    {"nvjet_sm90_qqtst_128x128_128x6_2x1_v_bz_coopA_algo2_Ablk128_Bvec128_bias_TNN", KernelKind::Gemm},
    {"nvjet_sm90_qqtst_128x128_128x6_2x1_v_bz_coopA_algo2_bias_TNT", KernelKind::Gemm},
    {"nvjet_sm90_qqtst_64x256_128x5_2x1_v_bz_coopA_algo2_geluauxbias_auxt_TNN", KernelKind::Gemm},
    {"nvjet_sm90_qrsss_128x128_128x6_1x2_h_bz_coopA_algo2_TNT", KernelKind::Gemm},
    {"nvjet_sm90_qrsss_64x128_128x8_2x1_v_bz_algo2_TNN", KernelKind::Gemm},
    {"nvjet_sm90_qrsss_96x128_128x7_1x2_h_bz_coopA_algo2_TNN", KernelKind::Gemm},
    {"nvjet_sm90_qrtst_128x128_128x6_2x1_v_bz_coopA_algo2_TNT", KernelKind::Gemm},
    {"nvjet_sm90_tss_128x192_64x5_2x1_v_bz_coopB_NTN", KernelKind::Gemm},
    {"nvjet_sm90_tss_128x192_64x5_2x1_v_bz_coopB_TNN", KernelKind::Gemm},
    {"nvjet_sm90_tss_128x256_64x4_2x1_v_bz_coopA_NTN", KernelKind::Gemm},
    {"nvjet_sm90_tss_128x64_64x8_1x2_h_bz_TNT", KernelKind::Gemm},
    {"nvjet_sm90_tss_256x128_64x4_1x2_h_bz_coopA_TNT", KernelKind::Gemm},
    {"nvjet_sm90_tss_32x64_64x16_2x1_v_bz_NTN", KernelKind::Gemm},
    {"nvjet_sm90_tss_64x128_64x8_2x1_v_bz_NTN", KernelKind::Gemm},
    {"nvjet_sm90_tst_128x128_64x6_2x1_v_bz_coopA_geluauxbias_auxt_TNN", KernelKind::Gemm},
    {"nvjet_sm90_tst_128x64_64x8_1x2_h_bz_TNT", KernelKind::Gemm},
    {"nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT", KernelKind::Gemm},
    {"nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT", KernelKind::Gemm},
    {"nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_bias_TNT", KernelKind::Gemm},
};

// Op ids: host ops, then kernel names.
enum : int { Fprop, Capture, Embedding, Eval, GemmK, EmbedKernel, HtoD, AddOp, Merge, Memset, OpCount };

trace::TraceMeta two_runs(bool eval_op) {
    trace::TraceMeta m;
    m.tool_version = "test";
    m.runs = {{"a", "current"}, {"b", "mxfp8"}};
    m.linears = {{"blocks.0.mlp.fc1", 0, 64, 128}};
    m.training_recipes = {"current", "mxfp8"};
    m.config_json = R"({"batch_size": 4, "seq_len": 8})";
    m.ops = {"fprop", "capture", "embedding", eval_op ? "eval" : "softmax_ce",
             "nvjet_sm90_tst_128x128_TNT", "fp8scope::cuda::(anonymous namespace)::embedding_forward_kernel<8>",
             "memcpy HtoD", "fp8scope::cuda::detail::binary_kernel<8, fp8scope::cuda::(anonymous namespace)::AddOp>",
             "fp8scope::cuda::an::(anonymous namespace)::merge_kernel", "memset"};
    return m;
}

// Stored as the recorder writes them: a record with no op comes with run 0.
trace::OpRecord dev(int run, std::int64_t step, int op, int parent, std::int64_t start, std::int64_t end, int linear = -1) {
    trace::OpRecord r;
    r.run = parent >= 0 ? run : 0;
    r.step = step;
    r.op = op;
    r.parent = parent;
    r.linear = linear;
    r.device = 0;
    r.stream = 7;
    r.kind = trace::OpKind::Kernel;
    r.start_ns = start;
    r.end_ns = end;
    return r;
}

// Step 5: run a's training 100..700, run b's 1000..1400, then the evaluation of both
// (old traces: records with no op, each run two batches, each batch starting with the
// embedding kernel, the first after a copy). Step 6: one GEMM per run and a memset
// after both (a snapshot's, not an evaluation: no eval loss at step 6).
TraceBatch old_trace() {
    TraceBatch b;
    for (int run : {0, 1}) {
        b.steps.push_back({run, 5, 4.0, 3.0, 1e-3, 1.0, 1.0, 1e4, run});
        b.steps.push_back({run, 6, 4.0, NAN, 1e-3, 1.0, 1.0, 1e4, run});
    }
    b.ops = {dev(0, 5, HtoD, -1, 100, 150),         // the batch copy: run a's
             dev(0, 5, GemmK, Fprop, 200, 500, 0),
             dev(0, 5, AddOp, -1, 520, 560),        // a residual add: run a's
             dev(0, 5, Merge, Capture, 600, 700),
             dev(0, 5, HtoD, -1, 1000, 1050),       // run b's batch copy, stored as run a's
             dev(0, 5, HtoD, -1, 2000, 2010),       // evaluation: run a ...
             dev(0, 5, EmbedKernel, -1, 2010, 2030), dev(0, 5, GemmK, -1, 2030, 2100),
             dev(0, 5, EmbedKernel, -1, 2100, 2120), dev(0, 5, GemmK, -1, 2120, 2200),
             dev(0, 5, HtoD, -1, 2200, 2210),       // ... run b
             dev(0, 5, EmbedKernel, -1, 2210, 2230), dev(0, 5, GemmK, -1, 2230, 2300),
             dev(0, 5, EmbedKernel, -1, 2300, 2320), dev(0, 5, GemmK, -1, 2320, 2400),
             dev(0, 6, GemmK, Fprop, 3000, 3100, 0), dev(0, 6, Memset, -1, 3400, 3450),
             dev(1, 5, GemmK, Fprop, 1100, 1400, 0),
             dev(1, 6, GemmK, Fprop, 3200, 3300, 0)};
    return b;
}

double total_ns(const std::vector<StepKernel>& v) {
    double t = 0;
    for (const auto& k : v) t += static_cast<double>(k.rec.end_ns - k.rec.start_ns);
    return t;
}

}  // namespace

class KernelAttributionTest : public QObject {
    Q_OBJECT
    SeriesStore store_;

    template <class F>
    auto read(F f) { return store_.read(f); }

private slots:
    void kindsOfRealKernelNames() {
        int kinds[kKernelKinds] = {};
        for (const NamedKind& k : kH200Kernels) {
            QCOMPARE(kernel_kind_of_name(k.name), k.kind);
            ++kinds[static_cast<int>(k.kind)];
        }
        QCOMPARE(int(std::size(kH200Kernels)), 74);
        QCOMPARE(kinds[int(KernelKind::Gemm)], 23);  // cuBLASLt's nvjet kernels
        QCOMPARE(kinds[int(KernelKind::Attention)], 4);
        QCOMPARE(kernel_kind_of_name("ncclDevKernel_AllReduce_Sum_f32_RING_LL"), KernelKind::Communication);
        QCOMPARE(kernel_kind_of_name("sm90_xmma_gemm_e4m3e4m3_bf16_f32_tn_n_tilesize128x128x64"), KernelKind::Gemm);
        QCOMPARE(kernel_kind_of_name("fp8scope::cuda::qk::(anonymous namespace)::cast_tile_kernel<float>"), KernelKind::Quantize);
    }

    void shortNames() {
        // Hand-read from each name: nvjet's type letters (q e4m3, r e5m2, t bf16, s f32) and
        // tile, xmma's and CUTLASS's type fields, our kernels' function and arguments.
        const std::pair<const char*, const char*> cases[] = {
            {"fp8scope::cuda::detail::binary_kernel<8, fp8scope::cuda::(anonymous namespace)::AddOp>", "binary<8, Add>"},
            {"fp8scope::cuda::qk::cast_block_kernel<float, (fp8scope::Format)0, (fp8scope::cuda::qk::BlockShape)2>",
             "cast_block<f32, e4m3, 128x128>"},
            {"fp8scope::cuda::qk::cast_block_kernel<unsigned short, (fp8scope::Format)1, (fp8scope::cuda::qk::BlockShape)0>",
             "cast_block<bf16, e5m2, per-tensor>"},
            {"fp8scope::cuda::(anonymous namespace)::zero_words_kernel", "zero_words"},
            {"fp8scope::cuda::attn::flash_forward_kernel<128>", "flash_forward<128>"},
            {"cub::CUB_300001_SM_900::detail::radix_sort::DeviceRadixSortSingleTileKernel<cub::CUB_300001_SM_900::detail::radix::policy_hub<in",
             "DeviceRadixSortSingleTileKernel"},  // cut at 128 characters: no arguments
            {"nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_bias_TNT", "cuBLASLt GEMM bf16 x bf16 -> bf16 256x128x64 +bias"},
            {"nvjet_sm90_tss_128x256_64x4_2x1_v_bz_coopA_NTN", "cuBLASLt GEMM bf16 x bf16 -> f32 128x256x64"},
            {"nvjet_sm90_qrsss_128x128_128x6_1x2_h_bz_coopA_algo2_TNT", "cuBLASLt GEMM e4m3 x e5m2 -> f32 128x128x128"},
            {"nvjet_sm90_qqtst_128x128_128x6_2x1_v_bz_coopA_algo2_Ablk128_Bvec128_bias_TNN",
             "cuBLASLt GEMM e4m3 x e4m3 -> bf16 128x128x128 block scales +bias"},
            {"nvjet_sm90_qqsss_128x64_128x8_1x2_h_bz_algo2_Avec128_Bvec128_TNT", "cuBLASLt GEMM e4m3 x e4m3 -> f32 128x64x128 1x128 scales"},
            {"nvjet_sm90_qqtst_64x256_128x5_2x1_v_bz_coopA_algo2_geluauxbias_auxt_TNN",
             "cuBLASLt GEMM e4m3 x e4m3 -> bf16 64x256x128 +gelu +bias"},
            {"sm90_xmma_gemm_e4m3e4m3_bf16_f32_tn_n_tilesize128x128x128_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas",
             "cuBLASLt GEMM e4m3 x e4m3 -> bf16 128x128x128"},
            {"cutlass3x_sm90_tensorop_gemm_e4m3_e4m3_f32_bf16_bf16_128x128x128_1x1x1_0_tnn_align16_warpspecialized_cooperative_epi_tma",
             "CUTLASS GEMM e4m3 x e4m3 -> bf16 128x128x128"},
            {"cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_32x6_tn_align8>", "CUTLASS GEMM 64x64x32"},
            {"nvjet_sm90_zzz_1x2_TNT", "nvjet_sm90_zzz_1x2_TNT"},  // no known form: as it is
            {"ncclDevKernel_AllReduce_Sum_f32_RING_LL", "ncclDevKernel_AllReduce_Sum_f32_RING_LL"},
            {"memcpy HtoD", "memcpy HtoD"},
        };
        for (const auto& [full, want] : cases) QCOMPARE(short_kernel_name(full), QString(want));
        // Every real name reads without namespaces; the GEMMs name their library.
        for (const NamedKind& k : kH200Kernels) {
            const QString s = short_kernel_name(k.name);
            QVERIFY2(!s.isEmpty() && !s.contains("::"), k.name);
            if (k.kind == KernelKind::Gemm) QVERIFY2(s.startsWith("cuBLASLt GEMM "), k.name);
        }
    }

    void recordsWithNoOpGoByTime() {
        QVERIFY(store_.append(store_.reset(two_runs(false)), old_trace()));
        read([](const TraceData& d) {
            const auto a = step_kernels(d, 0, 5), b = step_kernels(d, 1, 5);
            QCOMPARE(int(a.size()), 4 + 5);
            QCOMPARE(int(b.size()), 2 + 5);
            QCOMPARE(total_ns(a) + total_ns(b), 50.0 + 300 + 40 + 100 + 50 + 300 + 400);  // every record once
            QCOMPARE(a[0].rec.start_ns, std::int64_t(100));  // start ascending
            QCOMPARE(b[0].rec.start_ns, std::int64_t(1000));
            QVERIFY(!b[0].eval && b[0].rec.run == 1);
            int eval_a = 0, eval_b = 0;
            for (const auto& k : a) eval_a += k.eval && k.rec.start_ns >= 2000 && k.rec.end_ns <= 2200;
            for (const auto& k : b) eval_b += k.eval && k.rec.start_ns >= 2200 && k.rec.end_ns <= 2400;
            QCOMPARE(eval_a, 5);
            QCOMPARE(eval_b, 5);
            // Step 6 records no eval loss: the memset after both runs is the last run's.
            QCOMPARE(int(step_kernels(d, 0, 6).size()), 1);
            const auto b6 = step_kernels(d, 1, 6);
            QCOMPARE(int(b6.size()), 2);
            QVERIFY(!b6[1].eval && b6[1].rec.op == Memset);
        });
    }

    void evalOpsOfNewTraces() {
        // The engine's eval op: its kernels carry it; the records with no op after the
        // last run are then not an evaluation.
        TraceBatch batch;
        batch.steps.push_back({0, 5, 4.0, 3.0, 1e-3, 1.0, 1.0, 1e4, 0});
        batch.steps.push_back({1, 5, 4.0, 3.0, 1e-3, 1.0, 1.0, 1e4, 1});
        batch.ops = {dev(0, 5, GemmK, Fprop, 100, 200, 0), dev(0, 5, GemmK, Eval, 1000, 1100),
                     dev(0, 5, Memset, -1, 2000, 2010),
                     dev(1, 5, GemmK, Fprop, 300, 400, 0), dev(1, 5, GemmK, Eval, 1200, 1300)};
        QVERIFY(store_.append(store_.reset(two_runs(true)), batch));
        read([](const TraceData& d) {
            QCOMPARE(eval_op_id(d.meta), int(Eval));
            const auto a = step_kernels(d, 0, 5), b = step_kernels(d, 1, 5);
            QCOMPARE(int(a.size()), 2);
            QVERIFY(!a[0].eval && a[1].eval);
            QCOMPARE(int(b.size()), 3);
            QVERIFY(b[1].eval && !b[2].eval);  // the memset: the last run's, not an evaluation
            const StepBreakdown s = step_breakdown(d.meta, 5, a);
            QCOMPARE(s.ns[int(StepCategory::Eval)], 100.0);
            QCOMPARE(s.ns[int(StepCategory::Gemm)], 100.0);
            QCOMPARE(s.window_ns, 200.0);  // the training span and the evaluation's, not the gap
        });
    }

    void costsPerCategory() {
        QVERIFY(store_.append(store_.reset(two_runs(false)), old_trace()));
        read([](const TraceData& d) {
            const auto steps = run_breakdown(d, 0);
            QCOMPARE(int(steps.size()), 2);
            const StepBreakdown& s = steps[0];
            QCOMPARE(s.step, std::int64_t(5));
            QCOMPARE(s.ns[int(StepCategory::Gemm)], 300.0);
            QCOMPARE(s.ns[int(StepCategory::Capture)], 100.0);  // the analysis kernel in the capture op
            QCOMPARE(s.ns[int(StepCategory::Copy)], 50.0);
            QCOMPARE(s.ns[int(StepCategory::Other)], 40.0);     // the residual add
            QCOMPARE(s.ns[int(StepCategory::Eval)], 10.0 + 20 + 70 + 20 + 80);
            QCOMPARE(s.window_ns, 600.0 + 200);  // 100..700 and 2000..2200
            QCOMPARE(s.busy_ns, 690.0);
            QCOMPARE(s.ns[int(StepCategory::Idle)], 50.0 + 20 + 40);  // 150..200, 500..520, 560..600
            const auto b = run_breakdown(d, 1);
            QCOMPARE(b[0].ns[int(StepCategory::Idle)], 50.0);  // 1050..1100
            QCOMPARE(b[0].window_ns, 400.0 + 200);
            QCOMPARE(b[1].ns[int(StepCategory::Copy)], 50.0);  // step 6's memset
        });
        std::vector<std::pair<std::int64_t, std::int64_t>> spans = {{5, 10}, {0, 3}, {2, 4}, {10, 10}, {9, 12}};
        QCOMPARE(union_ns(spans), 4.0 + 7);
    }

    void chromeTraceOfARun() {
        // Run b's export holds its batch copy and its evaluation, stored as run a's.
        QVERIFY(store_.append(store_.reset(two_runs(false)), old_trace()));
        const QByteArray json = read([](const TraceData& d) { return chrome_trace_json(d, 1, 5, 5); });
        int complete = 0;
        double us = 0;
        for (const auto& v : QJsonDocument::fromJson(json).object()["traceEvents"].toArray())
            if (v.toObject()["ph"].toString() == "X") {
                ++complete;
                us += v.toObject()["dur"].toDouble();
            }
        QCOMPARE(complete, 2 + 5);
        QCOMPARE(us, (50 + 300 + 200) * 1e-3);
    }

    void tableGroups() {
        QVERIFY(store_.append(store_.reset(two_runs(false)), old_trace()));
        KernelStatsModel m(&store_);
        auto total_of = [&](const QString& name) {
            for (int r = 0; r < m.rowCount(); ++r)
                if (m.data(m.index(r, KernelStatsModel::Name), Qt::DisplayRole).toString() == name)
                    return m.value(r, KernelStatsModel::TotalMs) * 1e6;
            return -1.0;
        };
        m.refresh(0, 5, KernelStatsModel::CursorStep, {}, KernelStatsModel::ByCategory);
        QCOMPARE(m.rowCount(), 5);
        QCOMPARE(total_of("GEMM"), 300.0);
        QCOMPARE(total_of("eval"), 200.0);
        QCOMPARE(total_of("capture"), 100.0);
        QCOMPARE(total_of("copy/memset"), 50.0);
        QCOMPARE(total_of("other"), 40.0);
        QCOMPARE(m.stepSeconds(), 690e-9);
        m.refresh(0, 5, KernelStatsModel::CursorStep, {}, KernelStatsModel::ByOp);
        QCOMPARE(total_of("fprop"), 300.0);
        QCOMPARE(total_of("eval"), 200.0);
        QCOMPARE(total_of("(no op)"), 90.0);
        m.refresh(0, 5, KernelStatsModel::CursorStep, {}, KernelStatsModel::ByKernel);
        QCOMPARE(m.rowCount(), 7);  // the GEMM and the copy in training and in the evaluation apart
        int fprop = -1;
        for (int r = 0; r < m.rowCount(); ++r)
            if (m.data(m.index(r, KernelStatsModel::ParentOp), Qt::DisplayRole) == "fprop") fprop = r;
        QCOMPARE(m.data(m.index(fprop, KernelStatsModel::Name), Qt::DisplayRole).toString(), QString("nvjet_sm90_tst_128x128_TNT"));
        // 4 x 8 tokens through a 64 -> 128 linear: M 32, N 128, K 64, 2MNK FLOP in 300 ns.
        QCOMPARE(m.data(m.index(fprop, KernelStatsModel::Shape), Qt::DisplayRole).toString(), QString("32x128x64"));
        QCOMPARE(m.value(fprop, KernelStatsModel::Tflops), 2.0 * 32 * 128 * 64 / 300 * 1e-3);
        // A row's records are the ones the timeline highlights.
        read([&](const TraceData& d) {
            int lit = 0;
            for (const auto& k : step_kernels(d, 0, 5)) lit += m.matches(fprop, d.meta, k);
            QCOMPARE(lit, 1);
        });
        m.refresh(0, 5, KernelStatsModel::WholeRun, {}, KernelStatsModel::ByCategory);
        QCOMPARE(total_of("GEMM"), 400.0);  // steps 5 and 6
        QCOMPARE(m.steps(), 2);
    }

    void gemmDtypesPerRunRecipe() {
        // Each run's fprop GEMM under its recipe at the step (a: current, b: mxfp8).
        trace::TraceMeta meta = two_runs(false);
        meta.machine = "vm (cuda: NVIDIA H200 (sm_90), 139.8 GiB, CUDA runtime 13.0, cuBLASLt 13.1.0)";
        KernelStatsModel m(&store_);
        auto fprop_dtypes = [&](int run, int role) {
            m.refresh(run, 5, KernelStatsModel::CursorStep, {}, KernelStatsModel::ByKernel);
            for (int r = 0; r < m.rowCount(); ++r)
                if (m.data(m.index(r, KernelStatsModel::ParentOp), Qt::DisplayRole) == "fprop")
                    return m.data(m.index(r, KernelStatsModel::Dtypes), role).toString();
            return QString("no fprop row");
        };
        QVERIFY(store_.append(store_.reset(meta), old_trace()));
        QCOMPARE(fprop_dtypes(0, Qt::DisplayRole), QString("E4M3 x E4M3 -> BF16 (FP32 acc)"));
        QCOMPARE(fprop_dtypes(1, Qt::DisplayRole), QString("BF16 x BF16 -> BF16 (FP32 acc; MXFP8 emulated)"));
        // A machine string from before the backend was named in it: not known, and why.
        QVERIFY(store_.append(store_.reset(two_runs(false)), old_trace()));
        QCOMPARE(fprop_dtypes(0, Qt::DisplayRole), QString("?"));
        QVERIFY(fprop_dtypes(0, Qt::ToolTipRole).contains("names no cpu: or cuda: backend"));
    }

    void gemmDtypesOfACustomRecipe() {
        // Run a trains a custom recipe whose override keeps fc1's fprop in BF16: the row
        // says what the GEMM ran, not that the recipe is unknown.
        trace::TraceMeta meta = two_runs(false);
        meta.machine = "vm (cuda: NVIDIA H200 (sm_90), 139.8 GiB, CUDA runtime 13.0, cuBLASLt 13.1.0)";
        meta.runs[0].recipe = meta.training_recipes[0] = "current_bf16_fc1";
        for (int g = 0; g < 3; ++g)
            meta.precision.push_back({0, 0, Gemm(g), g == 0 ? "baseline" : "current", "", "", g == 0 ? 1 : 0});
        QVERIFY(store_.append(store_.reset(meta), old_trace()));
        KernelStatsModel m(&store_);
        m.refresh(0, 5, KernelStatsModel::CursorStep, {}, KernelStatsModel::ByKernel);
        QString fprop;
        for (int r = 0; r < m.rowCount(); ++r)
            if (m.data(m.index(r, KernelStatsModel::ParentOp), Qt::DisplayRole) == "fprop")
                fprop = m.data(m.index(r, KernelStatsModel::Dtypes), Qt::DisplayRole).toString();
        QCOMPARE(fprop, QString("BF16 x BF16 -> BF16 (FP32 acc)"));
    }

    void gemmShapes() {
        const trace::TraceMeta m = two_runs(false);
        QCOMPARE(step_tokens(m), std::int64_t(32));
        trace::OpRecord r = dev(0, 1, GemmK, Fprop, 0, 1, 0);
        QCOMPARE(gemm_shape(m, r, 32), std::optional(GemmShape{32, 128, 64}));
        trace::TraceMeta g = m;
        g.ops.push_back("dgrad");
        g.ops.push_back("wgrad");
        r.parent = static_cast<int>(g.ops.size()) - 2;
        QCOMPARE(gemm_shape(g, r, 32), std::optional(GemmShape{32, 64, 128}));
        r.parent = static_cast<int>(g.ops.size()) - 1;
        QCOMPARE(gemm_shape(g, r, 32), std::optional(GemmShape{128, 64, 32}));
        r.linear = -1;
        QVERIFY(!gemm_shape(g, r, 32));
    }
};

QTEST_GUILESS_MAIN(KernelAttributionTest)
#include "test_kernel_attribution.moc"
