// Helpers of the live stream tests: records with every field set to a distinct value,
// field-by-field comparison (floats by bit pattern, so NaN counts as equal to itself), a
// collecting client, temporary directories and bounded waits.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "live_client.h"
#include "trace_records.h"

namespace fp8scope::live::test {

template <class T>
bool same_bits(T a, T b) {
    return std::memcmp(&a, &b, sizeof(T)) == 0;
}
#define EXPECT_SAME_BITS(a, b) EXPECT_TRUE(::fp8scope::live::test::same_bits(a, b)) << #a " = " << (a) << " vs " << (b)

inline void expect_same(const trace::TraceMeta& a, const trace::TraceMeta& b) {
    EXPECT_EQ(a.format_version, b.format_version);
    EXPECT_EQ(a.tool_version, b.tool_version);
    EXPECT_EQ(a.created, b.created);
    EXPECT_EQ(a.machine, b.machine);
    EXPECT_EQ(a.config_json, b.config_json);
    ASSERT_EQ(a.runs.size(), b.runs.size());
    for (std::size_t i = 0; i < a.runs.size(); ++i) {
        EXPECT_EQ(a.runs[i].name, b.runs[i].name);
        EXPECT_EQ(a.runs[i].recipe, b.runs[i].recipe);
    }
    ASSERT_EQ(a.linears.size(), b.linears.size());
    for (std::size_t i = 0; i < a.linears.size(); ++i) {
        EXPECT_EQ(a.linears[i].name, b.linears[i].name);
        EXPECT_EQ(a.linears[i].layer, b.linears[i].layer);
        EXPECT_EQ(a.linears[i].in_features, b.linears[i].in_features);
        EXPECT_EQ(a.linears[i].out_features, b.linears[i].out_features);
    }
    EXPECT_EQ(a.recipes, b.recipes);
    EXPECT_EQ(a.training_recipes, b.training_recipes);
    EXPECT_EQ(a.ops, b.ops);
    EXPECT_EQ(a.capture_every, b.capture_every);
    EXPECT_EQ(a.blockmap_every, b.blockmap_every);
}

inline void expect_same(const trace::StepRecord& a, const trace::StepRecord& b) {
    EXPECT_EQ(a.run, b.run);
    EXPECT_EQ(a.step, b.step);
    EXPECT_SAME_BITS(a.loss, b.loss);
    EXPECT_SAME_BITS(a.eval_loss, b.eval_loss);
    EXPECT_SAME_BITS(a.lr, b.lr);
    EXPECT_SAME_BITS(a.grad_norm, b.grad_norm);
    EXPECT_SAME_BITS(a.step_time_s, b.step_time_s);
    EXPECT_SAME_BITS(a.tokens_per_s, b.tokens_per_s);
    EXPECT_EQ(a.recipe, b.recipe);
}

inline void expect_same(const trace::EventRecord& a, const trace::EventRecord& b) {
    EXPECT_EQ(a.run, b.run);
    EXPECT_EQ(a.step, b.step);
    EXPECT_EQ(a.kind, b.kind);
    EXPECT_EQ(a.detail, b.detail);
}

template <class T>
void expect_same_vec(const std::vector<T>& a, const std::vector<T>& b) {
    ASSERT_EQ(a.size(), b.size());
    for (std::size_t i = 0; i < a.size(); ++i) EXPECT_SAME_BITS(a[i], b[i]);
}

inline void expect_same(const trace::ScalingRecord& a, const trace::ScalingRecord& b) {
    EXPECT_EQ(a.run, b.run);
    EXPECT_EQ(a.step, b.step);
    expect_same_vec(a.amax, b.amax);
    expect_same_vec(a.scale, b.scale);
}

inline void expect_same(const trace::OperandKey& a, const trace::OperandKey& b) {
    EXPECT_EQ(a.run, b.run);
    EXPECT_EQ(a.step, b.step);
    EXPECT_EQ(a.linear, b.linear);
    EXPECT_EQ(a.gemm, b.gemm);
    EXPECT_EQ(a.operand, b.operand);
}

inline void expect_same(const ErrorStats& a, const ErrorStats& b) {
    EXPECT_EQ(a.recipe, b.recipe);
    for (auto [x, y] : {std::pair{a.amax, b.amax}, {a.mse, b.mse}, {a.sqnr_db, b.sqnr_db}, {a.rel_l2, b.rel_l2},
                        {a.max_abs_err, b.max_abs_err}, {a.cosine, b.cosine}, {a.underflow_pct, b.underflow_pct},
                        {a.overflow_pct, b.overflow_pct}, {a.scale_inv_min, b.scale_inv_min},
                        {a.scale_inv_max, b.scale_inv_max}})
        EXPECT_SAME_BITS(x, y);
    EXPECT_EQ(a.nonfinite_out, b.nonfinite_out);
}

inline void expect_same(const trace::OperandRecord& a, const trace::OperandRecord& b) {
    expect_same(a.key, b.key);
    EXPECT_EQ(a.recipe_in_use, b.recipe_in_use);
    EXPECT_SAME_BITS(a.scale, b.scale);
    const auto &s = a.stats, &t = b.stats;
    EXPECT_EQ(s.numel, t.numel);
    EXPECT_EQ(s.finite, t.finite);
    EXPECT_EQ(s.nan, t.nan);
    EXPECT_EQ(s.inf, t.inf);
    EXPECT_EQ(s.zero, t.zero);
    for (auto [x, y] : {std::pair{s.amax, t.amax}, {s.min_nonzero_abs, t.min_nonzero_abs}, {s.mean, t.mean},
                        {s.rms, t.rms}, {s.stddev, t.stddev}, {s.dynamic_range, t.dynamic_range}})
        EXPECT_SAME_BITS(x, y);
    EXPECT_EQ(s.histogram.bins, t.histogram.bins);
    EXPECT_EQ(s.histogram.zero, t.histogram.zero);
    EXPECT_EQ(s.histogram.nan, t.histogram.nan);
    EXPECT_EQ(s.histogram.inf, t.histogram.inf);
    EXPECT_SAME_BITS(s.outliers.kurtosis, t.outliers.kurtosis);
    EXPECT_SAME_BITS(s.outliers.k, t.outliers.k);
    EXPECT_SAME_BITS(s.outliers.frac_beyond_k_rms, t.outliers.frac_beyond_k_rms);
    expect_same_vec(s.outliers.channel_absmax, t.outliers.channel_absmax);
    ASSERT_EQ(s.outliers.top.size(), t.outliers.top.size());
    for (std::size_t i = 0; i < s.outliers.top.size(); ++i) {
        EXPECT_SAME_BITS(s.outliers.top[i].value, t.outliers.top[i].value);
        EXPECT_EQ(s.outliers.top[i].row, t.outliers.top[i].row);
        EXPECT_EQ(s.outliers.top[i].col, t.outliers.top[i].col);
    }
    ASSERT_EQ(a.errors.size(), b.errors.size());
    for (std::size_t i = 0; i < a.errors.size(); ++i) expect_same(a.errors[i], b.errors[i]);
    expect_same_vec(a.amax_history, b.amax_history);
}

inline void expect_same(const trace::BlockMapRecord& a, const trace::BlockMapRecord& b) {
    expect_same(a.key, b.key);
    EXPECT_EQ(a.recipe, b.recipe);
    EXPECT_EQ(a.rows, b.rows);
    EXPECT_EQ(a.cols, b.cols);
    EXPECT_EQ(a.tile_rows, b.tile_rows);
    EXPECT_EQ(a.tile_cols, b.tile_cols);
    EXPECT_EQ(a.grid_rows, b.grid_rows);
    EXPECT_EQ(a.grid_cols, b.grid_cols);
    expect_same_vec(a.absmax, b.absmax);
    expect_same_vec(a.scale_inv, b.scale_inv);
    expect_same_vec(a.sqnr_db, b.sqnr_db);
}

inline void expect_same(const trace::OpRecord& a, const trace::OpRecord& b) {
    EXPECT_EQ(a.run, b.run);
    EXPECT_EQ(a.step, b.step);
    EXPECT_EQ(a.op, b.op);
    EXPECT_EQ(a.linear, b.linear);
    EXPECT_EQ(a.layer, b.layer);
    EXPECT_EQ(a.device, b.device);
    EXPECT_EQ(a.stream, b.stream);
    EXPECT_EQ(a.start_ns, b.start_ns);
    EXPECT_EQ(a.end_ns, b.end_ns);
}

inline void expect_same(const trace::OpNameRecord& a, const trace::OpNameRecord& b) {
    EXPECT_EQ(a.id, b.id);
    EXPECT_EQ(a.name, b.name);
}

// --- sample records: every field differs from its default and from its neighbours ---

inline trace::TraceMeta sample_meta() {
    trace::TraceMeta m;
    m.format_version = 1;
    m.tool_version = "0.9.1";
    m.created = "2025-01-02T03:04:05Z";
    m.machine = "testhost (CPU)";
    m.config_json = R"({"steps": 40, "recipe": "delayed"})";
    m.runs = {{"baseline", "baseline"}, {"delayed", "delayed"}};
    m.linears = {{"blocks.0.attn.qkv", 0, 32, 96}, {"blocks.0.mlp.fc1", 0, 32, 128}};
    m.recipes = {"delayed", "current", "blockwise_1x128", "mxfp8"};
    m.training_recipes = {"baseline", "delayed", "current"};
    m.ops = {"fprop", "dgrad", "wgrad", "quantize"};
    m.capture_every = 10;
    m.blockmap_every = 50;
    return m;
}

inline trace::StepRecord sample_step(std::int64_t step, std::int32_t run = 0) {
    trace::StepRecord s;
    s.run = run;
    s.step = step;
    s.loss = 5.25 - 0.01 * static_cast<double>(step);
    s.eval_loss = step % 2 ? trace::kNone : 5.5;
    s.lr = 1e-3;
    s.grad_norm = 0.75;
    s.step_time_s = 0.0125;
    s.tokens_per_s = 10240.5;
    s.recipe = 1 + run;
    return s;
}

inline trace::EventRecord sample_event(std::int64_t step) {
    return {1, step, trace::EventKind::RecipeSwitch, "delayed -> current"};
}

inline trace::ScalingRecord sample_scaling(std::int64_t step) {
    trace::ScalingRecord s;
    s.run = 1;
    s.step = step;
    for (int i = 0; i < 12; ++i) {
        s.amax.push_back(0.5f * static_cast<float>(i + 1));
        s.scale.push_back(i % 3 ? 448.0f / static_cast<float>(i + 1) : std::nanf(""));
    }
    return s;
}

inline trace::OperandRecord sample_operand(std::int64_t step, std::int32_t linear = 1) {
    trace::OperandRecord o;
    o.key = {1, step, linear, Gemm::Dgrad, Operand::DY};
    o.recipe_in_use = 2;
    o.scale = 1792.0;
    auto& s = o.stats;
    s.numel = 4096;
    s.finite = 4090;
    s.nan = 2;
    s.inf = 4;
    s.zero = 17;
    s.amax = 3.5;
    s.min_nonzero_abs = 1e-9;
    s.mean = -0.01;
    s.rms = 0.9;
    s.stddev = 0.89;
    s.dynamic_range = 31.7;
    for (int i = 0; i < kHistBins; ++i) s.histogram.bins[static_cast<std::size_t>(i)] = i * 3 + 1;
    s.histogram.zero = 17;
    s.histogram.nan = 2;
    s.histogram.inf = 4;
    s.outliers.kurtosis = 7.5;
    s.outliers.k = 6.0;
    s.outliers.frac_beyond_k_rms = 0.002;
    s.outliers.channel_absmax = {0.1f, 3.5f, 0.25f};
    s.outliers.top = {{3.5f, 1, 2}, {-3.25f, 7, 0}};
    ErrorStats e1{"delayed", 3.5, 1e-4, 32.5, 0.02, 0.1, 0.9995, 0.5, 0.0, 1.0 / 128, 1.0 / 128, 0};
    ErrorStats e2{"mxfp8", 3.5, 2e-4, std::numeric_limits<double>::infinity(), 0.01, 0.05, 1.0, 0.1, 0.2,
                  1.0 / 256, 1.0 / 64, 3};
    o.errors = {e1, e2};
    o.amax_history = {1.0f, 2.0f, 3.5f};
    return o;
}

inline trace::BlockMapRecord sample_blockmap(std::int64_t step, std::size_t tiles = 6) {
    trace::BlockMapRecord b;
    b.key = {0, step, 1, Gemm::Fprop, Operand::W};
    b.recipe = 3;
    b.rows = 256;
    b.cols = 384;
    b.tile_rows = 128;
    b.tile_cols = 128;
    b.grid_rows = 2;
    b.grid_cols = static_cast<std::int32_t>(tiles / 2);
    for (std::size_t i = 0; i < tiles; ++i) {
        b.absmax.push_back(static_cast<float>(i) + 0.5f);
        b.scale_inv.push_back(1.0f / static_cast<float>(i + 2));
        b.sqnr_db.push_back(30.0f + static_cast<float>(i));
    }
    return b;
}

inline trace::OpRecord sample_op(std::int64_t step) { return {1, step, 3, 1, 0, -1, 2, 1000 + step, 2500 + step}; }

// The first name after sample_meta()'s op table.
inline trace::OpNameRecord sample_op_name() { return {4, "sm90_xmma_gemm_e4m3bf16_e4m3f32_f32_tn_n_tile128x128"}; }

// --- a client that keeps everything it receives -----------------------------------

struct Collected {
    std::mutex mu;
    std::condition_variable changed;
    std::vector<trace::TraceMeta> meta;
    std::vector<trace::StepRecord> steps;
    std::vector<trace::EventRecord> events;
    std::vector<trace::ScalingRecord> scaling;
    std::vector<trace::OperandRecord> operands;
    std::vector<trace::BlockMapRecord> blockmaps;
    std::vector<trace::OpRecord> ops;
    std::vector<trace::OpNameRecord> op_names;
    std::vector<std::string> closed;

    ClientHandlers handlers() {
        auto keep = [this](auto& into) {
            return [this, &into](const auto& r) {
                std::lock_guard lock(mu);
                into.push_back(r);
                changed.notify_all();
            };
        };
        ClientHandlers h;
        h.on_meta = keep(meta);
        h.on_step = keep(steps);
        h.on_event = keep(events);
        h.on_scaling = keep(scaling);
        h.on_operand = keep(operands);
        h.on_blockmap = keep(blockmaps);
        h.on_op = keep(ops);
        h.on_op_name = keep(op_names);
        h.on_closed = keep(closed);
        return h;
    }

    // Waits (at most `timeout`) until `done()` holds under the lock.
    template <class Pred>
    bool wait(Pred done, std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
        std::unique_lock lock(mu);
        return changed.wait_for(lock, timeout, done);
    }
};

template <class Pred>
bool eventually(Pred done, std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
        if (done()) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return done();
}

// A private directory, removed with everything in it.
struct TempDir {
    TempDir() {
        std::string tmpl = (std::filesystem::temp_directory_path() / "fp8scope-live-XXXXXX").string();
        path = ::mkdtemp(tmpl.data()) ? tmpl : throw std::runtime_error("mkdtemp failed");
    }
    ~TempDir() {
        std::error_code ec;
        std::filesystem::remove_all(path, ec);
    }
    std::string operator/(const std::string& name) const { return path + "/" + name; }
    std::string path;
};

}  // namespace fp8scope::live::test
