// Sample trace contents for the capture and live tests: metadata and records of every
// kind whose values follow from their indices, so a test can regenerate what it expects
// to read; a bit-exact comparison of any record, driven by its field list; temporary
// directories.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <unistd.h>
#include <vector>

#include "record_fields.h"
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
    m.quantizers = {"current_e4m3", "block1x128_e4m3_pow2", "mxfp8_e4m3_rceil"};
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
    s.grad_norm = 0.25 * (double(step) + 1.0);  // no int64 overflow at extreme steps
    s.step_ms = 100.0 + 0.1 * step;
    s.tokens_per_s = 4096.0 / (1e-3 * s.step_ms);
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
    o.quantizer_in_use = key.run == 0 ? -1 : static_cast<int>(key.step % m.quantizers.size());
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
    for (std::size_t r = 0; r < m.quantizers.size(); ++r) {
        ErrorStats e;
        e.recipe = m.quantizers[r];
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

// `grid_cols` < 0: 6 + recipe. Large grids make large frames for the live tests.
inline BlockMapRecord sample_blockmap(OperandKey key, int quantizer, std::int32_t grid_cols = -1) {
    BlockMapRecord b;
    b.key = key;
    b.quantizer = quantizer;
    b.rows = 64;
    b.cols = 192 + quantizer;
    b.tile_rows = 32;
    b.tile_cols = 32;
    b.grid_rows = 2;
    b.grid_cols = grid_cols < 0 ? 6 + quantizer : grid_cols;
    for (int i = 0; i < b.grid_rows * b.grid_cols; ++i) {
        b.absmax.push_back(static_cast<float>(double(i) + double(key.step) + quantizer));
        b.scale_inv.push_back(static_cast<float>((i + 1) / 448.0));
        b.sqnr_db.push_back(static_cast<float>(25.0 + i - quantizer));
    }
    return b;
}

// A float as a format 5 trace stores it in bfloat16: the upper 16 bits of the float32,
// rounded to the nearest, ties to even (written here with bits, not HDF5's conversion).
inline float as_bfloat16(float x) {
    if (std::isnan(x)) return x;
    std::uint32_t u;
    std::memcpy(&u, &x, 4);
    u = (u + 0x7FFFu + ((u >> 16) & 1u)) & 0xFFFF0000u;
    std::memcpy(&x, &u, 4);
    return x;
}
inline void round_to_bfloat16(std::vector<float>& v) {
    for (float& x : v) x = as_bfloat16(x);
}
// A record as a format 5 trace gives it back: channel absmax, block absmax and block SQNR
// in bfloat16 (docs/trace-format.md, "Storage").
inline OperandRecord as_stored(OperandRecord o) {
    round_to_bfloat16(o.stats.outliers.channel_absmax);
    return o;
}
inline BlockMapRecord as_stored(BlockMapRecord b) {
    round_to_bfloat16(b.absmax);
    round_to_bfloat16(b.sqnr_db);
    return b;
}

inline OpRecord sample_op(int run, std::int64_t step, int i) {
    // Times wrap (unsigned arithmetic) rather than overflow at the extreme steps of the
    // hostile-file tests.
    const auto t = static_cast<std::int64_t>(static_cast<std::uint64_t>(step) * 1000000u + std::uint64_t(i) * 100u);
    return {run, step, i % 3, i % 2, 0, -1, i % 4, t, static_cast<std::int64_t>(std::uint64_t(t) + 50u + std::uint64_t(i))};
}

// Rank `rank`'s share of `step` of a data-parallel job: rank 1 computes 30% longer.
inline RankStepRecord sample_rank_step(std::int64_t step, int rank) {
    const double compute = (rank == 1 ? 130.0 : 100.0) + 0.5 * double(step % 4);
    const double comm = 20.0 - 0.25 * rank;
    const double error = step % 2 ? kNone : 0.004 + 0.001 * rank;  // measured every other step
    RankStepRecord r{step, rank, compute, comm, compute + comm + 1.0, 4.0 - 0.01 * double(step) + 0.001 * rank, 2.0e6,
                     error};
    if (!std::isnan(error)) {  // FP8 sums against BF16 ones, measured with the error
        r.grad_snr_db = 30.5 + rank;
        r.grad_underflow_pct = 0.25;
        r.grad_overflow_pct = 0.0;
    }
    return r;
}

// A kernel name that arrives after the start: the next id of `m`'s op table.
inline OpNameRecord sample_op_name(const TraceMeta& m) {
    return {static_cast<std::int32_t>(m.ops.size()), "sm90_xmma_gemm_e4m3bf16_e4m3f32_f32_tn_n_tile128x128"};
}

// --- bit-exact comparison, field by field from the field lists ---------------------

// One value of a record: where it is, its bytes (floats compare by bit pattern, so NaN
// "not computed" equals itself) and how to show it.
struct Leaf {
    std::string path, bits, shown;
};

template <class T>
void flatten(const T& v, const std::string& path, std::vector<Leaf>& out) {
    if constexpr (std::is_arithmetic_v<T> || std::is_enum_v<T>) {
        char shown[32];
        if constexpr (std::is_floating_point_v<T>) std::snprintf(shown, sizeof shown, "%.17g", double(v));
        else std::snprintf(shown, sizeof shown, "%lld", static_cast<long long>(v));
        out.push_back({path, std::string(reinterpret_cast<const char*>(&v), sizeof v), shown});
    } else if constexpr (std::is_same_v<T, std::string>) {
        out.push_back({path, v, "'" + v + "'"});
    } else if constexpr (fields::Record<T>) {
        visit_fields(v, [&](std::string_view name, const auto& member, const auto&...) {
            flatten(member, path.empty() ? std::string(name) : path + "." + std::string(name), out);
        });
    } else {  // a vector or an array
        out.push_back({path + ".size", std::to_string(v.size()), std::to_string(v.size())});
        for (std::size_t i = 0; i < v.size(); ++i) flatten(v[i], path + "[" + std::to_string(i) + "]", out);
    }
}

// Every field of `got` has the bits of the same field of `want`.
template <class T>
void expect_same(const T& got, const T& want) {
    std::vector<Leaf> a, b;
    flatten(got, "", a);
    flatten(want, "", b);
    for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) {
        if (a[i].path != b[i].path) {  // a vector of another size: the rest does not line up
            ADD_FAILURE() << "fields differ from " << a[i].path << " / " << b[i].path;
            return;
        }
        EXPECT_TRUE(a[i].bits == b[i].bits) << a[i].path << ": " << a[i].shown << " vs " << b[i].shown;
    }
    EXPECT_EQ(a.size(), b.size());
}

// A fresh directory under the system temp dir, removed at the end of the test.
class TempDir {
public:
    TempDir() {
        std::string t = (std::filesystem::temp_directory_path() / "fp8scope-test-XXXXXX").string();
        if (!mkdtemp(t.data())) throw std::runtime_error("mkdtemp failed");
        path_ = t;
    }
    ~TempDir() {
        std::error_code ec;
        std::filesystem::remove_all(path_, ec);
    }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    std::string file(const std::string& name) const { return path_ + "/" + name; }
    std::string operator/(const std::string& name) const { return file(name); }
    const std::string& path() const { return path_; }

private:
    std::string path_;
};

}  // namespace fp8scope::trace::testing
