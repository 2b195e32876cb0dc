// Every recorded quantity goes through the writer and comes back unchanged from the
// reader: metadata, steps, events, scaling, operand statistics with all error figures,
// histograms and vectors, block maps, op timings and op names added late. The comparisons
// go through the field lists the codec uses too, so the file's datasets and columns are
// also checked against the format as docs/trace-format.md gives it, written out here:
// a field dropped from a list cannot vanish from both sides unseen. (A file an older
// version wrote is read in test_trace_v1_file.cpp, against values read with h5dump.)
#include <gtest/gtest.h>
#include <hdf5.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "trace_fixture.h"
#include "trace_reader.h"
#include "trace_writer.h"

namespace fp8scope::trace {
namespace {
using namespace testing;

constexpr std::int64_t kSteps = 20;

// Writes the sample trace: both runs, every step, operands every capture_every steps.
void write_sample(const std::string& path) {
    TraceMeta m = sample_meta();
    TraceWriter w(path, m);
    w.write(sample_event(0, 0, EventKind::Start));
    for (std::int64_t step = 0; step < kSteps; ++step) {
        for (int run = 0; run < 2; ++run) {
            w.write(sample_step(run, step));
            w.write(sample_scaling(m, run, step));
            if (step % m.capture_every == 0)
                for (int l = 0; l < 2; ++l)
                    for (Gemm g : {Gemm::Fprop, Gemm::Dgrad, Gemm::Wgrad})
                        for (Operand o : {Operand::X, Operand::W, Operand::DY})
                            if (operand_slot(l, g, o) >= 0) w.write(sample_operand(m, {run, step, l, g, o}));
            if (step % m.blockmap_every == 0)
                for (int r = 0; r < 3; ++r) w.write(sample_blockmap({run, step, 1, Gemm::Dgrad, Operand::DY}, r));
            for (int i = 0; i < 5; ++i) w.write(sample_op(run, step, i));
        }
        if (step == 12) {
            w.write(OpNameRecord{3, "cutlass_fp8_gemm_kernel<128,128>"});
            w.write(OpRecord{0, step, 3, -1, -1, 0, 7, 5, 9});
        }
    }
    w.write(sample_event(1, 7, EventKind::Rewind));
    w.write(EventRecord{0, 19, EventKind::RecipeSwitch, std::string(400, 'x')});
    w.close();
}

TEST(TraceRoundTrip, EveryQuantityComesBack) {
    TempDir dir;
    std::string path = dir.file("run.h5");
    write_sample(path);
    TraceReader r(path);
    TraceMeta m = sample_meta();

    const TraceMeta& got = r.meta();
    EXPECT_EQ(got.format_version, kFormatVersion);
    EXPECT_EQ(got.tool_version, m.tool_version);
    EXPECT_EQ(got.created, m.created);
    EXPECT_EQ(got.machine, m.machine);
    EXPECT_EQ(got.config_json, m.config_json);
    ASSERT_EQ(got.runs.size(), 2u);
    EXPECT_EQ(got.runs[1].name, "delayed");
    EXPECT_EQ(got.runs[1].recipe, "delayed");
    ASSERT_EQ(got.linears.size(), 2u);
    EXPECT_EQ(got.linears[1].name, "blocks.0.mlp.fc1");
    EXPECT_EQ(got.linears[1].in_features, 64);
    EXPECT_EQ(got.linears[1].out_features, 256);
    EXPECT_EQ(got.quantizers, m.quantizers);
    EXPECT_EQ(got.training_recipes, m.training_recipes);
    std::vector<std::string> ops = m.ops;
    ops.push_back("cutlass_fp8_gemm_kernel<128,128>");
    EXPECT_EQ(got.ops, ops);
    EXPECT_EQ(got.capture_every, 5);
    EXPECT_EQ(got.blockmap_every, 10);

    for (int run = 0; run < 2; ++run) {
        auto steps = r.steps(run);
        ASSERT_EQ(steps.size(), static_cast<std::size_t>(kSteps));
        for (std::int64_t i = 0; i < kSteps; ++i) expect_same(steps[i], sample_step(run, i));
        EXPECT_EQ(r.last_step(run), kSteps - 1);

        auto scaling = r.scaling(run, 3, 6);
        ASSERT_EQ(scaling.size(), 4u);
        for (std::size_t i = 0; i < scaling.size(); ++i) expect_same(scaling[i], sample_scaling(m, run, 3 + i));

        EXPECT_EQ(r.capture_steps(run), (std::vector<std::int64_t>{0, 5, 10, 15}));
        auto all = r.operands(run, 10);
        ASSERT_EQ(all.size(), 12u);  // 2 linears x 6 slots
        for (const auto& o : all) expect_same(o, as_stored(sample_operand(m, o.key)));
        auto one = r.operand({run, 15, 1, Gemm::Wgrad, Operand::DY});
        ASSERT_TRUE(one.has_value());
        expect_same(*one, as_stored(sample_operand(m, {run, 15, 1, Gemm::Wgrad, Operand::DY})));
        EXPECT_FALSE(r.operand({run, 16, 1, Gemm::Wgrad, Operand::DY}).has_value());
        EXPECT_FALSE(r.operand({run, 15, 1, Gemm::Fprop, Operand::DY}).has_value());

        auto series = r.operand_series(run, 0, Gemm::Fprop, Operand::W);
        ASSERT_EQ(series.size(), 4u);
        for (const auto& p : series) {
            OperandRecord want = sample_operand(m, {run, p.step, 0, Gemm::Fprop, Operand::W});
            EXPECT_EQ(p.amax, want.stats.amax);
            EXPECT_EQ(p.kurtosis, want.stats.outliers.kurtosis);
            EXPECT_EQ(p.dynamic_range, want.stats.dynamic_range);
            EXPECT_EQ(p.quantizer_in_use, want.quantizer_in_use);
            EXPECT_TRUE(p.scale == want.scale || (std::isnan(p.scale) && std::isnan(want.scale))) << p.scale;
            ASSERT_EQ(p.errors.size(), 3u);
            EXPECT_EQ(p.errors[2].sqnr_db, want.errors[2].sqnr_db);
        }

        EXPECT_EQ(r.blockmap_steps(run), (std::vector<std::int64_t>{0, 10}));
        auto maps = r.blockmaps({run, 10, 1, Gemm::Dgrad, Operand::DY});
        ASSERT_EQ(maps.size(), 3u);
        for (int rec = 0; rec < 3; ++rec) expect_same(maps[rec], as_stored(sample_blockmap({run, 10, 1, Gemm::Dgrad, Operand::DY}, rec)));
        EXPECT_TRUE(r.blockmaps({run, 10, 0, Gemm::Dgrad, Operand::DY}).empty());

        auto op_times = r.ops(run, 12, 13);
        std::vector<OpRecord> want_ops;
        for (std::int64_t s = 12; s <= 13; ++s) {
            for (int i = 0; i < 5; ++i) want_ops.push_back(sample_op(run, s, i));
            if (run == 0 && s == 12) want_ops.push_back({0, 12, 3, -1, -1, 0, 7, 5, 9});
        }
        ASSERT_EQ(op_times.size(), want_ops.size());
        for (std::size_t i = 0; i < want_ops.size(); ++i) expect_same(op_times[i], want_ops[i]);
    }

    auto events = r.events();
    ASSERT_EQ(events.size(), 3u);
    EXPECT_EQ(events[0].kind, EventKind::Start);
    EXPECT_EQ(events[0].detail, "start at 0");
    EXPECT_EQ(events[1].run, 1);
    EXPECT_EQ(events[1].step, 7);
    EXPECT_EQ(events[1].kind, EventKind::Rewind);
    EXPECT_EQ(events[2].detail, std::string(kEventDetailChars, 'x'));  // long details are cut
    EXPECT_FALSE(r.refresh());  // a finished file does not grow
}

// Every dataset of a format 7 file, each compound table's columns in order (an empty
// list: a dataset of plain numbers), as docs/trace-format.md lists them.
using Columns = std::vector<std::string>;
const std::map<std::string, Columns>& format7_datasets() {
    static const std::map<std::string, Columns> d = {
        {"/meta/runs", {"name", "recipe"}},
        {"/meta/linears", {"name", "layer", "in_features", "out_features"}},
        {"/meta/quantizers", {"name"}},
        {"/meta/recipes", {"name"}},
        {"/meta/ops", {"name"}},
        {"/meta/gemms", {"name"}},
        {"/meta/operands", {"name"}},
        {"/meta/event_kinds", {"name"}},
        {"/meta/precision", {"run", "linear", "gemm", "recipe", "a", "b", "overridden"}},
        {"/meta/injections", {"entry", "step", "until", "layer", "linear", "operand", "rows", "index", "scale"}},
        {"/steps", {"run", "step", "loss", "eval_loss", "lr", "grad_norm", "step_ms", "tokens_per_s", "recipe"}},
        {"/events", {"run", "step", "kind", "detail"}},
        {"/scaling/index", {"run", "step"}},
        {"/scaling/amax", {}},
        {"/scaling/scale", {}},
        {"/operands/table",
         {"run", "step", "linear", "gemm", "operand", "quantizer_in_use", "scale", "numel", "finite", "nan", "inf",
          "zero", "amax", "min_nonzero_abs", "mean", "rms", "stddev", "dynamic_range", "kurtosis", "outlier_k",
          "frac_beyond_k_rms", "hist_zero", "hist_nan", "hist_inf", "hist_min_exp", "hist_offset", "hist_count",
          "errors_offset", "errors_count", "channel_offset", "channel_count", "top_offset", "top_count",
          "history_offset", "history_count"}},
        {"/operands/errors",
         {"quantizer", "amax", "mse", "sqnr_db", "rel_l2", "max_abs_err", "cosine", "underflow_pct", "overflow_pct",
          "scale_inv_min", "scale_inv_max", "nonfinite_out"}},
        {"/operands/histogram", {}},
        {"/operands/channel_absmax", {}},
        {"/operands/top", {"value", "row", "col"}},
        {"/operands/amax_history", {}},
        {"/blockmaps/table",
         {"run", "step", "linear", "gemm", "operand", "quantizer", "rows", "cols", "tile_rows", "tile_cols", "grid_rows",
          "grid_cols", "offset", "count"}},
        {"/blockmaps/absmax", {}},
        {"/blockmaps/scale_inv", {}},
        {"/blockmaps/sqnr_db", {}},
        {"/ops",
         {"run", "step", "op", "linear", "layer", "device", "stream", "start_ns", "end_ns", "kind", "parent", "operand",
          "bytes"}},
        // Written by every writer since format 3; empty for a single process.
        {"/ranks",
         {"step", "rank", "compute_ms", "comm_ms", "step_ms", "loss", "grad_bytes", "grad_error", "grad_snr_db",
          "grad_underflow_pct", "grad_overflow_pct"}},
        // Written by every writer since GEMM output errors came (within format 4: older
        // files have none, test_trace_gemm_errors.cpp).
        {"/gemm_error", {"run", "step", "linear", "gemm", "sqnr_db", "rel_err", "max_abs_err"}},
        // Since format 6: every step's kernel sums.
        {"/kernel_steps", {"run", "step", "op", "parent", "kind", "detailed", "count", "total_ns", "min_ns", "max_ns", "bytes"}},
        // Since format 7: a SwiGLU model's gate/up alignment.
        {"/gate_up_alignment",
         {"run", "step", "linear", "channels", "mean_abs_cos", "p99_abs_cos", "max_abs_cos", "aligned", "top_channel",
          "top_cos", "top_norm_product", "top_down_amax", "down_amax_median"}},
    };
    return d;
}
const std::vector<std::string> kRootAttributes = {"format", "format_version", "tool_version", "created", "machine",
                                                  "config", "capture_every", "blockmap_every", "rank", "world_size",
                                                  "grad_dtype", "baseline_run", "kernel_timings", "kernel_window"};

// The datasets under group `g` (path `at`), with their compound members in order.
void collect(hid_t g, const std::string& at, std::map<std::string, Columns>& out) {
    H5G_info_t info;
    if (H5Gget_info(g, &info) < 0) return;
    for (hsize_t i = 0; i < info.nlinks; ++i) {
        char name[256] = {};
        H5Lget_name_by_idx(g, ".", H5_INDEX_NAME, H5_ITER_INC, i, name, sizeof(name), H5P_DEFAULT);
        const std::string path = at + "/" + name;
        hid_t o = H5Oopen(g, name, H5P_DEFAULT);
        if (H5Iget_type(o) == H5I_GROUP) {
            collect(o, path, out);
        } else if (H5Iget_type(o) == H5I_DATASET) {
            Columns& cols = out[path];
            hid_t type = H5Dget_type(o);
            if (H5Tget_class(type) == H5T_COMPOUND)
                for (int m = 0; m < H5Tget_nmembers(type); ++m) {
                    char* member = H5Tget_member_name(type, unsigned(m));
                    cols.push_back(member);
                    H5free_memory(member);
                }
            else if (H5Tget_class(type) == H5T_STRING)
                cols.push_back("name");  // the /meta name lists of fixed-length strings
            H5Tclose(type);
        }
        H5Oclose(o);
    }
}

std::map<std::string, Columns> datasets_of(const std::string& path) {
    std::map<std::string, Columns> out;
    hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    EXPECT_GE(f, 0) << path;
    if (f < 0) return out;
    collect(f, "", out);
    H5Fclose(f);
    return out;
}

TEST(TraceRoundTrip, FileHoldsTheDatasetsAndColumnsOfItsFormat) {
    EXPECT_EQ(kFormatVersion, 7) << "a new format version: add its datasets and columns here";
    TempDir dir;
    const std::string path = dir.file("run.h5");
    write_sample(path);
    const auto got = datasets_of(path);
    const auto& want = format7_datasets();
    for (const auto& [ds, cols] : want) {
        auto it = got.find(ds);
        ASSERT_NE(it, got.end()) << "missing dataset " << ds;
        EXPECT_EQ(it->second, cols) << ds;
    }
    for (const auto& [ds, cols] : got) EXPECT_TRUE(want.count(ds)) << "unexpected dataset " << ds;

    // A data-parallel job's trace has the same, with rows in /ranks.
    TraceMeta m = sample_meta();
    m.world_size = 2;
    m.grad_dtype = "bf16";
    const std::string ranks = dir.file("ranks.h5");
    {
        TraceWriter w(ranks, m);
        w.write(RankStepRecord{.step = 1, .rank = 1});
        w.close();
    }
    EXPECT_EQ(datasets_of(ranks), want);

    hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    ASSERT_GE(f, 0);
    std::vector<std::string> attrs;
    H5Aiterate2(f, H5_INDEX_CRT_ORDER, H5_ITER_NATIVE, nullptr,
                [](hid_t, const char* name, const H5A_info_t*, void* data) -> herr_t {
                    static_cast<std::vector<std::string>*>(data)->push_back(name);
                    return 0;
                },
                &attrs);
    H5Fclose(f);
    std::sort(attrs.begin(), attrs.end());
    std::vector<std::string> want_attrs = kRootAttributes;
    std::sort(want_attrs.begin(), want_attrs.end());
    EXPECT_EQ(attrs, want_attrs);
}

TEST(TraceWriter, RejectsRecordsThatDoNotFitTheMeta) {
    TempDir dir;
    TraceMeta m = sample_meta();
    TraceWriter w(dir.file("bad.h5"), m);
    EXPECT_THROW(w.write(StepRecord{.run = 2}), std::invalid_argument);
    ScalingRecord s = sample_scaling(m, 0, 0);
    s.amax.pop_back();
    EXPECT_THROW(w.write(s), std::invalid_argument);
    OperandRecord o = sample_operand(m, {0, 0, 0, Gemm::Fprop, Operand::DY});  // fprop has no dy
    EXPECT_THROW(w.write(o), std::invalid_argument);
    o = sample_operand(m, {0, 0, 2, Gemm::Fprop, Operand::X});  // no linear 2
    EXPECT_THROW(w.write(o), std::invalid_argument);
    EXPECT_THROW(w.write(OpRecord{.op = 3}), std::invalid_argument);
    EXPECT_THROW(w.write(OpNameRecord{4, "skips id 3"}), std::invalid_argument);
    BlockMapRecord b = sample_blockmap({0, 0, 0, Gemm::Fprop, Operand::X}, 0);
    b.sqnr_db.pop_back();
    EXPECT_THROW(w.write(b), std::invalid_argument);
    w.write(sample_step(0, 0));
    w.close();
    EXPECT_EQ(TraceReader(dir.file("bad.h5")).steps(0).size(), 1u);
}

TEST(TraceWriter, NamesLongerThanTheirTableAreAnError) {
    TempDir dir;
    TraceMeta m = sample_meta();
    m.runs[0].name = std::string(65, 'r');
    try {
        TraceWriter w(dir.file("long.h5"), m);
        FAIL() << "expected TraceError";
    } catch (const TraceError& e) {
        EXPECT_NE(std::string(e.what()).find("longer than 64"), std::string::npos) << e.what();
    }
}

TEST(TraceWriter, UnwritablePathIsAClearError) {
    TraceMeta m = sample_meta();
    EXPECT_THROW(TraceWriter("/nonexistent-dir/run.h5", m), TraceError);
}

}  // namespace
}  // namespace fp8scope::trace
