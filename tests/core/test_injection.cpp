// Outlier injection: the config's "inject" list and its errors (each names the field and
// the value), the operand a cast reads scaled in exactly the chosen channels or rows at
// exactly the chosen steps (checked element by element against the unscaled input), and a
// lock-step run whose cast figures for the injected operand jump at the first injected
// step against the same run without injection, with the start and end events.
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "cpu/cpu_backend.h"
#include "engine/fp8_linear.h"
#include "engine/train_config.h"
#include "support/cpu_engine.h"
#include "support/error_of.h"
#include "support/tiny_config.h"
#include "support/train_recorder.h"

namespace fp8scope {
namespace {

using namespace testing;

const char* kTiny = R"("model": {"n_layer": 2, "d_model": 32, "n_head": 2, "max_seq": 16}, "seq_len": 16,
  "batch_size": 4)";

std::string config_with(const std::string& entry) {
    return std::string("{") + kTiny + R"(, "inject": [)" + entry + "]}";
}

std::string error_for(const std::string& entry) {
    return error_of([&] { train_config_from_json(config_with(entry), "run.json"); });
}

TEST(Injection, ConfigReadsTheExampleAndWritesItBack) {
    const TrainConfig c = train_config_from_json(config_with(
        R"({"step": 20, "until": 40, "layer": 1, "linear": "mlp.fc2", "operand": "x", "channels": [17, 3], "scale": 300},
           {"step": 5, "linear": "attn.*", "operand": "dy", "rows": [0], "scale": 0.5})"));
    ASSERT_EQ(c.inject.size(), 2u);
    const Injection& a = c.inject[0];
    EXPECT_EQ(a.step, 20);
    EXPECT_EQ(a.until, 40);
    EXPECT_EQ(a.layer, 1);
    EXPECT_EQ(a.linear, "mlp.fc2");
    EXPECT_EQ(a.operand, Operand::X);
    EXPECT_FALSE(a.rows);
    EXPECT_EQ(a.indices, (std::vector<std::int64_t>{17, 3}));
    EXPECT_EQ(a.scale, 300.0f);
    const Injection& b = c.inject[1];
    EXPECT_FALSE(b.until.has_value());
    EXPECT_FALSE(b.layer.has_value());
    EXPECT_EQ(b.operand, Operand::DY);
    EXPECT_TRUE(b.rows);
    EXPECT_EQ(b.scale, 0.5f);
    // Written and read back: the same list (the writer's fields are the reader's).
    const TrainConfig back = train_config_from_json(train_config_to_json(c));
    EXPECT_FALSE(first_difference(c, back).has_value());
    EXPECT_EQ(back.inject[0].describe(), "x of blocks.1.mlp.fc2 channels 17,3 x300, steps 20..40");
    EXPECT_EQ(back.inject[1].describe(), "dy of attn.* of every block rows 0 x0.5, steps 5..");
    // Without the key: none.
    EXPECT_TRUE(train_config_from_json(std::string("{") + kTiny + "}").inject.empty());
}

TEST(Injection, ConfigErrorsNameTheFieldAndTheValue) {
    const std::string ok = R"("step": 2, "linear": "mlp.fc2", "operand": "x", "channels": [1], "scale": 300)";
    const std::map<std::string, std::vector<std::string>> cases = {
        // unknown operand
        {R"({"step": 2, "linear": "mlp.fc2", "operand": "y", "channels": [1], "scale": 3})",
         {"inject[0].operand", "'y'", "x, w, dy"}},
        // layer out of range (2 blocks)
        {R"({"step": 2, "layer": 2, "linear": "mlp.fc2", "operand": "x", "channels": [1], "scale": 3})",
         {"inject[0].layer", "block 2", "[0, 2)"}},
        // a linear name that matches nothing
        {R"({"step": 2, "layer": 0, "linear": "mlp.fc3", "operand": "x", "channels": [1], "scale": 3})",
         {"inject[0].linear", "'mlp.fc3'", "block 0", "mlp.fc2"}},
        // fc2's input has 4 * 32 = 128 channels
        {R"({"step": 2, "linear": "mlp.fc2", "operand": "x", "channels": [128], "scale": 3})",
         {"inject[0].channels", "128", "blocks.0.mlp.fc2", "[0, 128)"}},
        // x has B*T = 64 rows
        {R"({"step": 2, "linear": "mlp.fc2", "operand": "x", "rows": [64], "scale": 3})",
         {"inject[0].rows", "64", "[0, 64)"}},
        // w of fc2 has 32 rows (output features)
        {R"({"step": 2, "linear": "mlp.fc2", "operand": "w", "rows": [40], "scale": 3})",
         {"inject[0].rows", "40", "[0, 32)"}},
        {R"({"step": 2, "linear": "mlp.fc2", "operand": "x", "channels": [1], "scale": 0})",
         {"inject[0].scale", "finite factor > 0", "got 0"}},
        {R"({"step": 2, "linear": "mlp.fc2", "operand": "x", "channels": [1], "scale": -2})",
         {"inject[0].scale", "got -2"}},
        {R"({"step": 2, "linear": "mlp.fc2", "operand": "x", "channels": [1], "scale": 1e39})",
         {"inject[0].scale", "finite", "inf"}},
        {R"({"step": 5, "until": 4, "linear": "mlp.fc2", "operand": "x", "channels": [1], "scale": 3})",
         {"inject[0].until", "4 is before step 5"}},
        {R"({"step": 2, "linear": "mlp.fc2", "operand": "x", "channels": [1], "rows": [1], "scale": 3})",
         {"inject[0].rows", "channels or rows, not both"}},
        {R"({"step": 2, "linear": "mlp.fc2", "operand": "x", "scale": 3})", {"inject[0].channels", "channels or rows"}},
        {R"({"step": 2, "linear": "mlp.fc2", "operand": "x", "channels": [1, 1], "scale": 3})",
         {"inject[0].channels", "1 is listed twice"}},
        {R"({"step": 0, "linear": "mlp.fc2", "operand": "x", "channels": [1], "scale": 3})",
         {"inject[0].step", "first step is 1"}},
        {"{" + ok + R"(, "colour": 1})", {"unknown field 'inject[0].colour'"}},
        {"{" + ok + R"(}, {"step": 2, "linear": "mlp.fc2", "operand": "x", "channels": [-1], "scale": 3})",
         {"inject[1].channels", "-1 is negative"}},
    };
    for (const auto& [entry, needles] : cases) {
        const std::string e = error_for(entry);
        FP8SCOPE_EXPECT_CONTAINS(e, "run.json: ");
        for (const std::string& n : needles) FP8SCOPE_EXPECT_CONTAINS(e, n) << " for " << entry;
    }
    // Overrides check the same way.
    TrainConfig c = train_config_from_json(std::string("{") + kTiny + "}");
    FP8SCOPE_EXPECT_CONTAINS(
        error_of([&] {
            apply_override(c, R"(inject=[{"step": 2, "linear": "mlp.fc2", "operand": "q", "channels": [1], "scale": 3}])");
        }),
        "inject[0].operand");
}

// What a capture sink is handed before each cast: fprop's x and w, dgrad's dy.
struct OperandCopies : CaptureSink {
    std::map<Operand, std::vector<float>> seen;
    void on_operand(const OperandCapture& c) override {
        if (c.transposed_repeat || (c.operand == Operand::W && c.gemm != Gemm::Fprop)) return;
        const float* p = static_cast<const float*>(c.values.data);
        seen[c.operand].assign(p, p + c.values.numel());
    }
    void on_op(const OpTiming&) override {}
};

// Every element of `got` against `in`: multiplied by `factor` in the listed columns (rows
// with `by_row`), bit for bit the same elsewhere.
void expect_scaled(const std::vector<float>& got, const std::vector<float>& in, std::int64_t cols,
                   const std::vector<std::int64_t>& index, bool by_row, float factor, const std::string& what) {
    ASSERT_EQ(got.size(), in.size()) << what;
    int differ = 0;
    for (std::size_t e = 0; e < in.size(); ++e) {
        const std::int64_t at = by_row ? std::int64_t(e) / cols : std::int64_t(e) % cols;
        const bool chosen = std::find(index.begin(), index.end(), at) != index.end();
        const float want = chosen ? in[e] * factor : in[e];
        if (got[e] != want && differ++ < 3) ADD_FAILURE() << what << ": element " << e << " " << got[e] << " != " << want;
    }
    EXPECT_EQ(differ, 0) << what;
}

TEST(Injection, TheCastReadsTheChosenChannelsScaledAtTheChosenStepsOnly) {
    CpuBackend cpu(1);
    const std::int64_t N = 6, K = 8, M = 4;
    const std::vector<LinearInfo> linears = {{"blocks.0.mlp.fc2", 0, K, M}};
    Fp8Linear lin(cpu, linears);
    lin.set_recipe(training_recipe("current"));
    OperandCopies sink;
    lin.set_capture(&sink, true);
    Injection x{2, 3, 0, "mlp.fc2", Operand::X, false, {1, 5}, 1000.0f};
    Injection w{3, 3, std::nullopt, "mlp.*", Operand::W, true, {2}, 0.5f};
    Injection dy{4, std::nullopt, 0, "mlp.fc2", Operand::DY, true, {0, 5}, 4.0f};
    lin.set_injections(resolve_injections({x, w, dy}, linears, N));

    std::mt19937 rng(3);
    std::normal_distribution<float> d;
    auto random = [&](std::int64_t n) {
        std::vector<float> v(std::size_t(n), 0.0f);
        for (float& e : v) e = d(rng);
        return v;
    };
    const std::vector<float> xs = random(N * K), ws = random(M * K), dys = random(N * M);
    std::vector<float> xin = xs, win = ws, dyin = dys, y(N * M), dx(N * K), dw(M * K);
    const ActPtr xp{reinterpret_cast<std::byte*>(xin.data()), DType::F32};
    const ActPtr dyp{reinterpret_cast<std::byte*>(dyin.data()), DType::F32};
    const ActPtr yp{reinterpret_cast<std::byte*>(y.data()), DType::F32};
    const ActPtr dxp{reinterpret_cast<std::byte*>(dx.data()), DType::F32};
    for (std::int64_t step = 1; step <= 5; ++step) {
        const std::string at = "step " + std::to_string(step);
        lin.set_rounding(1, std::uint64_t(step));
        lin.forward(0, xp, win.data(), nullptr, yp, N, nullptr, true);
        lin.backward(0, dyp, xp, win.data(), dxp, dw.data(), nullptr, N, nullptr);
        lin.flush_reports();
        expect_scaled(sink.seen[Operand::X], xs, K, x.indices, false, x.active(step) ? 1000.0f : 1.0f, "x at " + at);
        expect_scaled(sink.seen[Operand::W], ws, K, w.indices, true, w.active(step) ? 0.5f : 1.0f, "w at " + at);
        expect_scaled(sink.seen[Operand::DY], dys, M, dy.indices, true, dy.active(step) ? 4.0f : 1.0f, "dy at " + at);
        // The scaled tensors are copies: the activation, weight and gradient stay.
        EXPECT_EQ(xin, xs);
        EXPECT_EQ(win, ws);
        EXPECT_EQ(dyin, dys);
    }
    // Evaluation reads x as it is, even at an injected step.
    lin.set_rounding(1, 2);
    lin.set_capture(nullptr, false);
    std::vector<float> y_eval(N * M), y_train(N * M);
    lin.forward(0, xp, win.data(), nullptr, {reinterpret_cast<std::byte*>(y_eval.data()), DType::F32}, N, nullptr,
                false);
    Fp8Linear plain(cpu, linears);
    plain.set_recipe(training_recipe("current"));
    plain.forward(0, xp, win.data(), nullptr, {reinterpret_cast<std::byte*>(y_train.data()), DType::F32}, N, nullptr,
                  false);
    EXPECT_EQ(y_eval, y_train);
}

// Step by step, the cast figures of x of blocks.1.mlp.fc2 in each run.
struct FigureSink : CaptureSink, TrainObserver {
    static constexpr int kLinear = 1 * 4 + 3;  // blocks.1.mlp.fc2
    std::int64_t step = 0;
    std::map<std::int64_t, CastInfo> x;
    void on_step_begin(std::int64_t s, bool) override { step = s; }
    void on_scaling(const OperandScaling& s) override {
        if (s.linear == kLinear && s.operand == Operand::X) x[step] = s.cast;
    }
    void on_operand(const OperandCapture&) override {}
    void on_op(const OpTiming&) override {}
};

TEST(Injection, LockStepRunsSeeTheOutlierFromItsFirstStep) {
    constexpr int kStart = 4, kUntil = 5, kSteps = 7;
    TrainConfig c = tiny_config(kSteps);
    c.compare = {"current", "delayed"};
    c.rewind.enabled = false;  // the outlier's loss spike must not rewind
    const TrainConfig plain_config = c;
    c.inject = {{kStart, kUntil, 1, "mlp.fc2", Operand::X, false, {3}, 1000.0f}};

    CpuTrainer injected(c), plain(plain_config);
    FigureSink sinks[2][2];  // [injected, plain][run]
    Recorder events;
    injected.add_observer(&events);
    for (int r = 0; r < 2; ++r) {
        injected.set_capture_sink(r, &sinks[0][r]);
        injected.add_observer(&sinks[0][r]);
        plain.set_capture_sink(r, &sinks[1][r]);
        plain.add_observer(&sinks[1][r]);
    }
    ASSERT_TRUE(injected.run().error.empty());
    ASSERT_TRUE(plain.run().error.empty());
    for (int r = 0; r < 2; ++r) {
        const auto &a = sinks[0][r].x, &b = sinks[1][r].x;
        const std::string run = c.compare[std::size_t(r)];
        ASSERT_EQ(a.size(), std::size_t(kSteps)) << run;
        for (std::int64_t s = 1; s < kStart; ++s) {  // the same runs until then, bit for bit
            EXPECT_EQ(a.at(s).amax, b.at(s).amax) << run << " step " << s;
            EXPECT_EQ(a.at(s).overflow, b.at(s).overflow) << run << " step " << s;
        }
        // At the first injected step the amax is the outlier's: 1000x a channel of the
        // same tensor, so far above the plain run's largest element.
        EXPECT_GT(a.at(kStart).amax, 100 * b.at(kStart).amax) << run;
    }
    // Current scaling follows the outlier (no overflow, as in the plain run). Delayed
    // scaling casts with the scale of its history, set for the plain tensor: every one of
    // the outlier channel's B*T = 128 elements overflows on top of what the plain run's
    // cast does; a step later the history holds the outlier's amax and nothing overflows.
    const std::int64_t rows = std::int64_t(c.batch_size) * c.seq_len;
    EXPECT_EQ(sinks[0][0].x.at(kStart).overflow, 0);
    EXPECT_EQ(sinks[1][0].x.at(kStart).overflow, 0);
    EXPECT_EQ(sinks[0][1].x.at(kStart).overflow - sinks[1][1].x.at(kStart).overflow, rows);
    EXPECT_EQ(sinks[0][1].x.at(kStart + 1).overflow, 0);

    const auto starts = events.details(EventKind::Injection);
    ASSERT_EQ(starts.size(), 2u);
    EXPECT_EQ(starts[0], "start: x of blocks.1.mlp.fc2 channels 3 x1000, steps 4..5");
    EXPECT_EQ(starts[1], "end: x of blocks.1.mlp.fc2 channels 3 x1000, steps 4..5");
    std::vector<std::int64_t> at;
    for (const TrainEvent& e : events.events)
        if (e.kind == EventKind::Injection) {
            at.push_back(e.step);
            EXPECT_EQ(e.run, -1);
        }
    EXPECT_EQ(at, (std::vector<std::int64_t>{kStart, kUntil + 1}));
}

}  // namespace
}  // namespace fp8scope
