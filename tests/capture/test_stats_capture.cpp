// The capture sink: what it records for an operand, checked against figures computed
// here from the values (scalar FP8 encoder, plain loops), and a short training run
// recorded end to end through the writer and read back.
#include <gtest/gtest.h>

#include <cmath>
#include <mutex>
#include <random>

#include "engine/trainer.h"
#include "cpu/analysis.h"
#include "cpu/cpu_backend.h"
#include "fp8/format.h"
#include "stats_capture.h"
#include "trace_fixture.h"
#include "trace_reader.h"
#include "trace_writer.h"
#include "train_recorder.h"
#include "vector_sink.h"
#include "support/cpu_engine.h"

namespace fp8scope::trace {
namespace {

using fp8scope::testing::CpuModel;
using fp8scope::testing::CpuTrainer;

CpuBackend& cpu() {
    static CpuBackend backend;
    return backend;
}

// A host matrix as the capture hook sees an operand of the CPU backend.
TensorDesc host(std::vector<float>& v, std::int64_t rows, std::int64_t cols) {
    return TensorDesc::of(v.data(), rows, cols, Device::CPU);
}
using namespace testing;


TraceMeta capture_meta(std::vector<std::string> recipes) {
    TraceMeta m = sample_meta();
    m.runs = {{"r", "current"}};
    m.quantizers = std::move(recipes);
    return m;
}

std::vector<float> gaussian(std::int64_t n, unsigned seed, float outlier) {
    std::mt19937 g(seed);
    std::normal_distribution<float> d(0.0f, 1.0f);
    std::vector<float> v(n);
    for (auto& x : v) x = d(g);
    v[n / 3] = outlier;
    return v;
}

// SQNR of a per-tensor cast with scale s, from the exact scalar encoder.
double hand_sqnr(const std::vector<float>& v, Format f, float s) {
    double sig = 0, err = 0;
    for (float x : v) {
        double q = decode(f, encode(f, x * s)) * (1.0f / s);
        sig += double(x) * x;
        err += (q - x) * (q - x);
    }
    return 10 * std::log10(sig / err);
}

TEST(StatsCapture, ScalingEveryStepOperandsOnlyAtCaptureSteps) {
    TraceMeta m = capture_meta({"current_e4m3", "block1x128_fp32"});
    VectorSink sink;
    OpNames ops(m.ops);
    StatsCapture cap(0, m, sink, ops);
    auto v = gaussian(64 * 64, 1, -37.5f);
    Recipe current = CurrentScaling{Format::E4M3};
    OperandCapture c{1, Gemm::Wgrad, Operand::X, host(v, 64, 64), &cpu(), &current, nullptr};

    cap.begin_step(1, false, false);
    cap.on_operand(c);
    cap.end_step();
    cap.begin_step(2, true, false);
    cap.on_operand(c);
    cap.on_op(OpTiming{"fprop", 1, 0, 100, 250});
    cap.on_op(OpTiming{"softmax", -1, 0, 300, 400});
    cap.end_step();

    auto scaling = sink.all<ScalingRecord>();
    ASSERT_EQ(scaling.size(), 2u);
    int slot = operand_slot(1, Gemm::Wgrad, Operand::X);
    for (const auto& s : scaling) {
        EXPECT_EQ(s.amax[slot], 37.5f);
        EXPECT_EQ(s.scale[slot], 448.0f / 37.5f);
        EXPECT_TRUE(std::isnan(s.amax[0]));  // not seen this step
    }
    auto operands = sink.all<OperandRecord>();
    ASSERT_EQ(operands.size(), 1u);  // step 2 only
    const auto& o = operands[0];
    EXPECT_EQ(o.key.step, 2);
    EXPECT_EQ(o.quantizer_in_use, 0);
    EXPECT_FLOAT_EQ(static_cast<float>(o.scale), 448.0f / 37.5f);
    EXPECT_EQ(o.stats.amax, 37.5);
    ASSERT_EQ(o.errors.size(), 2u);
    EXPECT_NEAR(o.errors[0].sqnr_db, hand_sqnr(v, Format::E4M3, 448.0f / 37.5f), 1e-6);

    // A name longer than the trace keeps is cut to its prefix, and ids stay in order.
    const std::string kernel = "void gemm_kernel<" + std::string(200, 'T') + ">";
    EXPECT_EQ(ops.id(kernel, sink), 4);
    EXPECT_EQ(ops.id(kernel.substr(0, 150), sink), 4);
    auto names = sink.all<OpNameRecord>();
    ASSERT_EQ(names.size(), 2u);
    EXPECT_EQ(names[0].name, "softmax");
    EXPECT_EQ(names[0].id, 3);
    EXPECT_EQ(names[1].name, kernel.substr(0, OpNameRecord::kMaxLength));
    EXPECT_EQ(check_record(m, 4, names[1]), "");  // the writer and the stream accept it
    auto times = sink.all<OpRecord>();
    ASSERT_EQ(times.size(), 2u);
    EXPECT_EQ(times[0].op, 0);
    EXPECT_EQ(times[1].op, 3);
    EXPECT_EQ(times[0].end_ns - times[0].start_ns, 150);
}

// The delayed recipe in use is judged with the scale it cast with; a delayed entry that
// is not in use stays a what-if first step (s = 1).
TEST(StatsCapture, DelayedScalingIsJudgedWithItsHistory) {
    TraceMeta m = capture_meta({"current_e4m3", "delayed_e4m3", "delayed_e5m2"});
    VectorSink sink;
    OpNames ops(m.ops);
    StatsCapture cap(0, m, sink, ops);
    auto v = gaussian(32 * 128, 2, 9.0f);
    Recipe delayed = DelayedScaling{Format::E4M3};
    DelayedState state(std::get<DelayedScaling>(delayed));
    state.push(2.0f);  // the history says amax 2: this step's 9 overflows
    cap.begin_step(5, true, false);
    cap.on_operand({0, Gemm::Fprop, Operand::X, host(v, 32, 128), &cpu(), &delayed, &state});
    auto o = sink.all<OperandRecord>().at(0);
    EXPECT_EQ(o.quantizer_in_use, 1);
    EXPECT_EQ(o.scale, 224.0);  // 448 / 2
    EXPECT_EQ(o.amax_history, std::vector<float>{2.0f});
    std::int64_t clamped = 0;
    for (float x : v)  // past max when the non-saturating cast gives NaN
        clamped += !is_finite_code(Format::E4M3, encode(Format::E4M3, x * 224.0f, Overflow::NonSaturate));
    EXPECT_GT(clamped, 0);
    EXPECT_NEAR(o.errors[1].overflow_pct, 100.0 * clamped / v.size(), 1e-9);
    EXPECT_NEAR(o.errors[1].sqnr_db, hand_sqnr(v, Format::E4M3, 224.0f), 1e-9);
    EXPECT_NEAR(o.errors[2].sqnr_db, hand_sqnr(v, Format::E5M2, 1.0f), 1e-9);
}

// Block maps at a block-map step: 128 x 128 tiles (partial at the edges) whose max |x|,
// largest scale_inv and SQNR are computed here with the scalar encoder.
TEST(StatsCapture, BlockMapTilesMatchAHandComputation) {
    const std::int64_t R = 300, C = 200;
    auto v = gaussian(R * C, 3, 100.0f);
    TraceMeta m = capture_meta({"current_e4m3", "block1x128_fp32", "delayed_e4m3"});
    VectorSink sink;
    OpNames ops(m.ops);
    StatsCapture cap(0, m, sink, ops);
    cap.begin_step(1, true, true);
    cap.on_operand({0, Gemm::Fprop, Operand::X, host(v, R, C), &cpu(), nullptr, nullptr});
    auto maps = sink.all<BlockMapRecord>();
    ASSERT_EQ(maps.size(), 2u);  // delayed needs a history: no map
    float amax = 0;
    for (float f : v) amax = std::max(amax, std::fabs(f));
    for (const BlockMapRecord& b : maps) {
        SCOPED_TRACE(m.quantizers.at(b.quantizer));
        ASSERT_EQ(b.grid_rows, 3);
        ASSERT_EQ(b.grid_cols, 2);
        EXPECT_EQ(b.tile_rows, 128);
        EXPECT_EQ(b.tile_cols, 128);
        const bool per_tensor = b.quantizer == 0;
        for (int gr = 0; gr < 3; ++gr)
            for (int gc = 0; gc < 2; ++gc) {
                float tmax = 0, si_max = 0;
                double sig = 0, err = 0;
                for (std::int64_t r = gr * 128; r < std::min<std::int64_t>(R, gr * 128 + 128); ++r) {
                    // Per tensor: one scale; 1x128: the amax of this row's 128-column block.
                    const std::int64_t c0 = gc * 128, c1 = std::min<std::int64_t>(C, c0 + 128);
                    float bmax = 0;
                    for (std::int64_t c = c0; c < c1; ++c) bmax = std::max(bmax, std::fabs(v[r * C + c]));
                    const float s = 448.0f / (per_tensor ? amax : bmax);
                    si_max = std::max(si_max, 1.0f / s);
                    for (std::int64_t c = c0; c < c1; ++c) {
                        float f = v[r * C + c];
                        tmax = std::max(tmax, std::fabs(f));
                        double q = decode(Format::E4M3, encode(Format::E4M3, f * s)) * (1.0f / s);
                        sig += double(f) * f;
                        err += (q - f) * (q - f);
                    }
                }
                int cell = gr * 2 + gc;
                EXPECT_EQ(b.absmax[cell], tmax);
                EXPECT_EQ(b.scale_inv[cell], si_max);
                EXPECT_NEAR(b.sqnr_db[cell], 10 * std::log10(sig / err), 1e-3);
            }
    }
}

// A transposed repeat reuses the figures that do not depend on orientation; every figure
// still equals a full analysis of the transposed values (up to summation order).
TEST(StatsCapture, TransposedRepeatMatchesAFullAnalysis) {
    TraceMeta m = capture_meta({"current_e4m3", "block128x128_fp32", "block1x128_fp32", "mxfp8_e4m3_rceil"});
    VectorSink sink;
    OpNames ops(m.ops);
    StatsCapture cap(0, m, sink, ops);
    const std::int64_t R = 200, C = 300;
    auto v = gaussian(R * C, 5, 80.0f);
    for (std::int64_t c = 0; c < C; ++c) v[7 * C + c] *= 50.0f;  // an outlier row: 1x128 blocks care
    std::vector<float> t(v.size());
    for (std::int64_t r = 0; r < R; ++r)
        for (std::int64_t c = 0; c < C; ++c) t[c * R + r] = v[r * C + c];
    Recipe current = CurrentScaling{Format::E4M3};
    cap.begin_step(1, true, false);
    cap.on_operand({0, Gemm::Fprop, Operand::X, host(v, R, C), &cpu(), &current, nullptr});
    cap.on_operand({0, Gemm::Wgrad, Operand::X, host(t, C, R), &cpu(), &current, nullptr, true});
    auto recs = sink.all<OperandRecord>();
    ASSERT_EQ(recs.size(), 2u);
    std::vector<Recipe> recipes;
    for (const auto& n : m.quantizers) recipes.push_back(parse_recipe(n));
    Analysis full = analyze(MatrixView{t.data(), C, R}, recipes);
    const auto& got = recs[1].errors;
    ASSERT_EQ(got.size(), 4u);
    for (std::size_t k = 0; k < 4; ++k) {
        SCOPED_TRACE(m.quantizers[k]);
        EXPECT_NEAR(got[k].sqnr_db, full.errors[k].sqnr_db, 1e-9);
        EXPECT_NEAR(got[k].mse, full.errors[k].mse, 1e-12 * full.errors[k].mse);
        EXPECT_EQ(got[k].scale_inv_max, full.errors[k].scale_inv_max);
    }
    EXPECT_NE(got[2].sqnr_db, recs[0].errors[2].sqnr_db);  // 1x128 blocks follow the orientation
    EXPECT_EQ(recs[1].stats.outliers.channel_absmax, full.tensor.outliers.channel_absmax);
}

TEST(TrainRecorder, AShortRunIsRecordedEndToEnd) {
    TempDir dir;
    TrainConfig config;
    config.model.n_layer = 1;
    config.model.d_model = 32;
    config.model.n_head = 2;
    config.model.max_seq = 16;
    config.compare = {"baseline", "delayed"};
    config.steps = 6;
    config.batch_size = 2;
    config.seq_len = 16;
    config.capture_every = 2;
    config.eval.every = 3;
    config.data.corpus_bytes = 1 << 14;
    config.threads = 1;
    CpuTrainer trainer(config);
    std::vector<LinearInfo> linears = trainer.model(0).linears();
    TraceMeta meta = make_trace_meta(config, linears, "test", 4);
    std::string path = dir.file("train.h5");
    std::vector<fp8scope::StepRecord> seen;
    struct Keep : TrainObserver {
        std::vector<fp8scope::StepRecord>* out;
        void on_step(const fp8scope::StepRecord& r) override { out->push_back(r); }
    } keep;
    keep.out = &seen;
    {
        TraceWriter writer(path, meta);
        TrainRecorder recorder(meta, writer);
        trainer.add_observer(&recorder);
        trainer.add_observer(&keep);
        for (int r = 0; r < trainer.runs(); ++r) trainer.set_capture_sink(r, recorder.sink(r));
        trainer.run();
        writer.close();
    }
    TraceReader reader(path);
    ASSERT_EQ(reader.meta().runs.size(), 2u);
    ASSERT_EQ(reader.meta().linears.size(), linears.size());
    for (int run = 0; run < 2; ++run) {
        auto steps = reader.steps(run);
        ASSERT_EQ(steps.size(), 6u);
        for (const auto& want : seen) {
            if (want.run != run) continue;
            const auto& got = steps[want.step - 1];
            EXPECT_EQ(got.step, want.step);
            EXPECT_EQ(got.loss, want.loss);
            EXPECT_EQ(got.lr, want.lr);
            EXPECT_EQ(got.grad_norm, want.grad_norm);
            EXPECT_EQ(std::isnan(got.eval_loss), !want.eval_loss.has_value());
            EXPECT_EQ(reader.meta().training_recipes.at(got.recipe), want.recipe);
        }
        EXPECT_EQ(reader.capture_steps(run), (std::vector<std::int64_t>{1, 3, 5}));
        auto ops = reader.operands(run, 3);
        EXPECT_EQ(ops.size(), linears.size() * kOperandsPerLinear);
        for (const auto& o : ops) {
            EXPECT_EQ(o.errors.size(), reader.meta().quantizers.size());
            if (run == 0) EXPECT_EQ(o.quantizer_in_use, -1);  // baseline: unquantized
            else EXPECT_EQ(reader.meta().quantizers.at(o.quantizer_in_use).rfind("delayed", 0), 0u);
            EXPECT_GT(o.stats.numel, 0);
        }
        EXPECT_EQ(reader.blockmap_steps(run), (std::vector<std::int64_t>{1, 5}));
        EXPECT_FALSE(reader.ops(run, 1, 6).empty());
        // Delayed casts report every step; baseline operands are seen at capture steps.
        auto scaling = reader.scaling(run, 1, 6);
        ASSERT_EQ(scaling.size(), run == 0 ? 3u : 6u);
        if (run == 1) {  // every quantized operand has an amax at every step
            for (const auto& s : scaling)
                for (float a : s.amax) EXPECT_GT(a, 0.0f) << "step " << s.step;
        }
    }
}

}  // namespace
}  // namespace fp8scope::trace
