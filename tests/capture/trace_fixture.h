// Sample trace contents for the capture tests: metadata and records of every kind whose
// values follow from their indices, so a test can regenerate what it expects to read.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <unistd.h>

#include "trace_records.h"

namespace fp8scope::trace::testing {

inline TraceMeta sample_meta() {
    TraceMeta m;
    m.tool_version = "fp8scope 0.1.0-test";
    m.created = "2024-01-02T03:04:05Z";
    m.machine = "test-host (cpu)";
    m.config_json = R"({"steps": 100, "recipe": "delayed"})";
    m.runs = {{"baseline", "baseline"}, {"delayed", "delayed"}};
    m.linears = {{"blocks.0.attn.qkv", 0, 64, 192}, {"blocks.0.mlp.fc1", 0, 64, 256}};
    m.recipes = {"current_e4m3", "block1x128_e4m3_pow2", "mxfp8_e4m3_rceil"};
    m.training_recipes = {"baseline", "delayed"};
    m.ops = {"fprop", "dgrad", "wgrad"};
    m.capture_every = 5;
    m.blockmap_every = 10;
    return m;
}

inline StepRecord sample_step(int run, std::int64_t step) {
    StepRecord s;
    s.run = run;
    s.step = step;
    s.loss = 5.0 - 0.01 * step + 0.5 * run;
    s.eval_loss = step % 10 == 0 ? 5.5 - 0.01 * step : kNone;
    s.lr = 1e-3 * (1.0 + step) / 100.0;
    s.grad_norm = 0.25 * (step + 1);
    s.step_time_s = 0.1 + 1e-4 * step;
    s.tokens_per_s = 4096.0 / s.step_time_s;
    s.recipe = run;
    return s;
}

inline EventRecord sample_event(int run, std::int64_t step, EventKind kind) {
    return {run, step, kind, std::string(event_kind_name(kind)) + " at " + std::to_string(step)};
}

inline ScalingRecord sample_scaling(const TraceMeta& m, int run, std::int64_t step) {
    ScalingRecord r;
    r.run = run;
    r.step = step;
    std::size_t n = m.linears.size() * kOperandsPerLinear;
    for (std::size_t i = 0; i < n; ++i) {
        r.amax.push_back(static_cast<float>(1.0 + i + 0.5 * step));
        r.scale.push_back(i % 3 == 0 ? std::nanf("") : static_cast<float>(448.0 / (1.0 + i + 0.5 * step)));
    }
    return r;
}

inline OperandRecord sample_operand(const TraceMeta& m, OperandKey key) {
    OperandRecord o;
    o.key = key;
    double k = key.step + 10.0 * key.linear + 100.0 * static_cast<int>(key.gemm) + 1000.0 * static_cast<int>(key.operand);
    o.recipe_in_use = key.run == 0 ? -1 : static_cast<int>(key.step % m.recipes.size());
    o.scale = key.run == 0 ? kNone : 448.0 / (1.0 + k);
    TensorStats& s = o.stats;
    s.numel = 64 * 192;
    s.finite = s.numel - 3;
    s.nan = 2;
    s.inf = 1;
    s.zero = 7;
    s.amax = 1.0 + k;
    s.min_nonzero_abs = 1e-6 * (1 + key.step);
    s.mean = 0.001 * k;
    s.rms = 0.5 + 0.001 * k;
    s.stddev = 0.49 + 0.001 * k;
    s.dynamic_range = std::log2(s.amax / s.min_nonzero_abs);
    s.histogram.zero = 7;
    s.histogram.nan = 2;
    s.histogram.inf = 1;
    // A span of bins that moves with the step; the bins at both ends of the range too.
    for (int e = -20 + static_cast<int>(key.step % 5); e <= 3; ++e)
        s.histogram.bins[e - kHistMinExp] = 100 + e * e + key.step;
    if (key.step % 2 == 0) s.histogram.bins[0] = 1, s.histogram.bins[kHistBins - 1] = 2;
    s.outliers.kurtosis = 3.0 + 0.1 * k;
    s.outliers.k = 6.0;
    s.outliers.frac_beyond_k_rms = 1e-4 * (1 + key.linear);
    for (int c = 0; c < 8 + key.linear; ++c) s.outliers.channel_absmax.push_back(static_cast<float>(c + 0.25 * k));
    for (int t = 0; t < 4; ++t) s.outliers.top.push_back({static_cast<float>(s.amax - t), t * 3 + key.step, t + 1});
    for (std::size_t r = 0; r < m.recipes.size(); ++r) {
        ErrorStats e;
        e.recipe = m.recipes[r];
        e.amax = s.amax;
        e.mse = 1e-5 * (r + 1) * (1 + key.step);
        e.sqnr_db = 30.0 + r - 0.01 * k;
        e.rel_l2 = 0.03 / (r + 1);
        e.max_abs_err = 0.1 * (r + 1);
        e.cosine = 0.999 - 0.0001 * r;
        e.underflow_pct = 0.5 * r;
        e.overflow_pct = r == 0 ? 0.01 * key.step : 0.0;
        e.scale_inv_min = 1.0 / 448.0 / (r + 1);
        e.scale_inv_max = 1.0 / 448.0 * (r + 1);
        e.nonfinite_out = r == 2 ? 1 : 0;
        o.errors.push_back(e);
    }
    if (key.run == 1)
        for (int h = 0; h < 1 + key.step % 7; ++h) o.amax_history.push_back(static_cast<float>(0.5 * h + k));
    return o;
}

inline BlockMapRecord sample_blockmap(OperandKey key, int recipe) {
    BlockMapRecord b;
    b.key = key;
    b.recipe = recipe;
    b.rows = 64;
    b.cols = 192 + recipe;
    b.tile_rows = 32;
    b.tile_cols = 32;
    b.grid_rows = 2;
    b.grid_cols = 6 + recipe;
    for (int i = 0; i < b.grid_rows * b.grid_cols; ++i) {
        b.absmax.push_back(static_cast<float>(i + key.step + recipe));
        b.scale_inv.push_back(static_cast<float>((i + 1) / 448.0));
        b.sqnr_db.push_back(static_cast<float>(25.0 + i - recipe));
    }
    return b;
}

inline OpRecord sample_op(int run, std::int64_t step, int i) {
    return {run, step, i % 3, i % 2, 0, -1, i % 4, step * 1000000 + i * 100, step * 1000000 + i * 100 + 50 + i};
}

// Doubles equal, NaN equal to NaN.
inline void expect_same(double a, double b, const char* what) {
    if (std::isnan(a) && std::isnan(b)) return;
    EXPECT_EQ(a, b) << what;
}

// A fresh directory under the system temp dir, removed at the end of the test.
class TempDir {
public:
    TempDir() {
        std::string t = (std::filesystem::temp_directory_path() / "fp8scope-test-XXXXXX").string();
        path_ = mkdtemp(t.data());
    }
    ~TempDir() {
        std::error_code ec;
        std::filesystem::remove_all(path_, ec);
    }
    std::string file(const std::string& name) const { return path_ + "/" + name; }
    const std::string& path() const { return path_; }

private:
    std::string path_;
};

}  // namespace fp8scope::trace::testing
