// A trace of format version 1 as the writer of that time wrote it (tests/data/trace_v1.h5:
// `train --steps 12 --capture-every 5 --blockmap-every 10 --compare
// baseline,delayed,blockwise`, one layer of width 64) keeps reading with today's reader,
// and today's writer still writes the same layout. The expected values were read out of
// the file with h5dump, not with the project's reader.
#include <gtest/gtest.h>
#include <hdf5.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "trace_fixture.h"
#include "trace_reader.h"
#include "trace_writer.h"

namespace fp8scope::trace {
namespace {
using namespace testing;

std::string v1_file() {
    return (std::filesystem::path(FP8SCOPE_SOURCE_DIR) / "tests" / "data" / "trace_v1.h5").string();
}

TEST(TraceV1File, MetaAndStepsReadBack) {
    TraceReader r(v1_file());
    const TraceMeta& m = r.meta();
    EXPECT_EQ(m.format_version, 1);
    EXPECT_EQ(m.rank, 0);  // before format 3: a single process
    EXPECT_EQ(m.world_size, 1);
    EXPECT_EQ(m.grad_dtype, "");  // the view names no type
    EXPECT_TRUE(r.rank_steps().empty());
    EXPECT_EQ(m.capture_every, 5);
    EXPECT_EQ(m.blockmap_every, 10);
    ASSERT_EQ(m.runs.size(), 3u);
    EXPECT_EQ(m.runs[1].name, "delayed");
    EXPECT_EQ(m.runs[2].recipe, "blockwise");
    ASSERT_EQ(m.linears.size(), 4u);
    EXPECT_EQ(m.linears[2].name, "blocks.0.mlp.fc1");
    EXPECT_EQ(m.linears[2].in_features, 64);
    EXPECT_EQ(m.linears[2].out_features, 256);
    ASSERT_EQ(m.quantizers.size(), 13u);
    EXPECT_EQ(m.quantizers[7], "mxfp8_e4m3_floor");
    EXPECT_EQ(m.quantizers[11], "delayed_e4m3");
    EXPECT_EQ(m.training_recipes,
              (std::vector<std::string>{"baseline", "delayed", "delayed_e4m3", "current", "blockwise", "mxfp8"}));
    ASSERT_EQ(m.ops.size(), 13u);
    EXPECT_EQ(m.ops[5], "embedding");

    for (int run = 0; run < 3; ++run) EXPECT_EQ(r.steps(run).size(), 12u) << run;
    const StepRecord first = r.steps(0).front();
    EXPECT_EQ(first.step, 1);
    EXPECT_EQ(first.loss, 5.5720291137695312);
    EXPECT_TRUE(std::isnan(first.eval_loss));
    EXPECT_EQ(first.lr, 9.9999997473787516e-05);
    EXPECT_EQ(first.grad_norm, 2.2827659365462702);
    EXPECT_EQ(first.tokens_per_s, 5346.5864071645265);
    EXPECT_EQ(first.step_ms, 1e3 * 0.023940508999999999);  // step_time_s, in seconds, before format 4
    EXPECT_EQ(first.recipe, 0);
    const StepRecord last = r.steps(2).back();
    EXPECT_EQ(last.step, 12);
    EXPECT_EQ(last.loss, 4.8593664169311523);
    EXPECT_EQ(last.eval_loss, 4.7757220268249512);
    EXPECT_EQ(last.recipe, 4);

    auto events = r.events();
    ASSERT_EQ(events.size(), 2u);
    EXPECT_EQ(events[0].run, -1);
    EXPECT_EQ(events[0].kind, EventKind::Start);
    EXPECT_EQ(events[1].step, 12);
    EXPECT_EQ(events[1].kind, EventKind::End);
    EXPECT_EQ(events[1].detail, "done");
}

TEST(TraceV1File, OperandStatisticsReadBack) {
    TraceReader r(v1_file());
    EXPECT_EQ(r.capture_steps(1), (std::vector<std::int64_t>{1, 6, 11}));
    auto o = r.operand({1, 11, 2, Gemm::Fprop, Operand::X});
    ASSERT_TRUE(o.has_value());
    EXPECT_EQ(o->quantizer_in_use, 11);
    EXPECT_EQ(o->scale, 117.30549621582031);
    const TensorStats& s = o->stats;
    EXPECT_EQ(s.numel, 8192);
    EXPECT_EQ(s.finite, 8192);
    EXPECT_EQ(s.nan, 0);
    EXPECT_EQ(s.amax, 3.3307991027832031);
    EXPECT_EQ(s.min_nonzero_abs, 1.8962658941745758e-05);
    EXPECT_EQ(s.mean, 0.0012352172794152239);
    EXPECT_EQ(s.rms, 1.001414738120787);
    EXPECT_EQ(s.stddev, 1.0014139763173862);
    EXPECT_EQ(s.dynamic_range, 17.422347541947239);
    EXPECT_EQ(s.outliers.kurtosis, 2.5206871939019435);
    EXPECT_EQ(s.outliers.k, 6.0);
    EXPECT_EQ(s.outliers.frac_beyond_k_rms, 0.0);
    // Bins from exponent -16 (the file keeps only the span of nonzero bins).
    const std::int64_t bins[] = {1, 0, 1, 0, 1, 2, 2, 11, 10, 47, 72, 182, 373, 762, 1414, 2471, 2539, 304};
    std::int64_t total = 0;
    for (int e = kHistMinExp; e <= kHistMaxExp; ++e) {
        const std::int64_t want = e >= -16 && e <= 1 ? bins[e + 16] : 0;
        EXPECT_EQ(s.histogram.count(e), want) << "exponent " << e;
        total += s.histogram.count(e);
    }
    EXPECT_EQ(total, 8192);
    ASSERT_EQ(s.outliers.channel_absmax.size(), 64u);
    EXPECT_EQ(s.outliers.channel_absmax[0], 2.79317164f);
    EXPECT_EQ(s.outliers.channel_absmax[2], 2.80101228f);
    ASSERT_EQ(s.outliers.top.size(), 16u);
    EXPECT_EQ(s.outliers.top[1].value, 3.09783411f);
    EXPECT_EQ(s.outliers.top[1].row, 50);
    EXPECT_EQ(s.outliers.top[1].col, 6);
    ASSERT_EQ(o->amax_history.size(), 10u);
    EXPECT_EQ(o->amax_history[0], 3.68461323f);
    EXPECT_EQ(o->amax_history[9], 3.12818933f);
    ASSERT_EQ(o->errors.size(), 13u);
    EXPECT_EQ(o->errors[7].recipe, "mxfp8_e4m3_floor");
    EXPECT_EQ(o->errors[7].sqnr_db, 30.691200678646808);
    EXPECT_EQ(o->errors[7].overflow_pct, 0.69580078125);
    EXPECT_EQ(o->errors[11].scale_inv_min, 0.0085247494280338287);
    EXPECT_EQ(o->errors[12].scale_inv_max, 1.0);

    auto outliers = r.operand({1, 1, 1, Gemm::Fprop, Operand::X});
    ASSERT_TRUE(outliers.has_value());
    EXPECT_EQ(outliers->stats.outliers.frac_beyond_k_rms, 0.000244140625);
    EXPECT_EQ(outliers->stats.outliers.kurtosis, 7.9294925799910336);
}

TEST(TraceV1File, BlockMapsScalingAndOpsReadBack) {
    TraceReader r(v1_file());
    EXPECT_EQ(r.blockmap_steps(1), (std::vector<std::int64_t>{1, 11}));
    auto maps = r.blockmaps({1, 11, 2, Gemm::Fprop, Operand::W});
    ASSERT_EQ(maps.size(), 11u);  // the delayed recipes have no map
    const BlockMapRecord& b = maps[1];
    EXPECT_EQ(b.quantizer, 1);
    EXPECT_EQ(b.rows, 256);
    EXPECT_EQ(b.cols, 64);
    EXPECT_EQ(b.tile_rows, 128);
    EXPECT_EQ(b.tile_cols, 64);
    EXPECT_EQ(b.grid_rows, 2);
    EXPECT_EQ(b.grid_cols, 1);
    EXPECT_EQ(b.absmax, (std::vector<float>{0.0840948746f, 0.0839077607f}));
    EXPECT_EQ(b.scale_inv, (std::vector<float>{0.000244140625f, 0.000244140625f}));
    EXPECT_EQ(b.sqnr_db, (std::vector<float>{31.6470184f, 31.5937901f}));

    auto scaling = r.scaling(2, 2, 2);
    ASSERT_EQ(scaling.size(), 1u);
    ASSERT_EQ(scaling[0].amax.size(), 24u);
    EXPECT_EQ(std::vector<float>(scaling[0].amax.begin(), scaling[0].amax.begin() + 6),
              (std::vector<float>{3.31954026f, 0.0727179796f, 0.00233775261f, 0.0727179796f, 0.00233775261f,
                                  3.31954026f}));

    auto ops = r.ops(0, 1, 1);
    ASSERT_FALSE(ops.empty());
    EXPECT_EQ(ops[0].op, 5);
    EXPECT_EQ(ops[0].linear, -1);
    EXPECT_EQ(ops[0].device, -1);
    EXPECT_EQ(ops[0].start_ns, 1175413572953);
    EXPECT_EQ(ops[0].end_ns, 1175416069571);
    // Format 2's kernel fields read as "a host op" in a format 1 file.
    EXPECT_EQ(ops[0].kind, OpKind::Host);
    EXPECT_EQ(ops[0].parent, -1);
    EXPECT_EQ(ops[0].operand, -1);
    EXPECT_EQ(ops[0].bytes, 0);
}

// Format 4's names of the datasets and columns format 1 had under other names.
std::string today(const std::string& dataset) {
    if (dataset == "/meta/recipes") return "/meta/quantizers";
    if (dataset == "/meta/training_recipes") return "/meta/recipes";
    return dataset;
}
std::string today(const std::string& dataset, const std::string& column) {
    if (dataset == "/steps" && column == "step_time_s") return "step_ms";
    if (dataset == "/operands/table" && column == "recipe_in_use") return "quantizer_in_use";
    if ((dataset == "/operands/errors" || dataset == "/blockmaps/table") && column == "recipe") return "quantizer";
    return column;
}

// Format 1's compound type `ta` and today's `tb` of `ds`: the same members, in the same
// order and places, of the same types, under today's names.
void expect_same_members(const std::string& ds, hid_t ta, hid_t tb) {
    ASSERT_EQ(H5Tget_nmembers(tb), H5Tget_nmembers(ta)) << ds;
    EXPECT_EQ(H5Tget_size(tb), H5Tget_size(ta)) << ds;
    for (int i = 0; i < H5Tget_nmembers(ta); ++i) {
        char* a = H5Tget_member_name(ta, unsigned(i));
        char* b = H5Tget_member_name(tb, unsigned(i));
        EXPECT_EQ(std::string(b), today(ds, a)) << ds;
        EXPECT_EQ(H5Tget_member_offset(tb, unsigned(i)), H5Tget_member_offset(ta, unsigned(i))) << ds << "." << b;
        hid_t ma = H5Tget_member_type(ta, unsigned(i)), mb = H5Tget_member_type(tb, unsigned(i));
        EXPECT_GT(H5Tequal(ma, mb), 0) << ds << "." << b << ": the type changed";
        H5Tclose(ma);
        H5Tclose(mb);
        H5free_memory(a);
        H5free_memory(b);
    }
}

// Every dataset a writer creates today has the type and shape rank of format 1's, but
// /ops, to which format 2 added the kernel fields: its format 1 members keep their types.
// Format 4 renamed some of them (today()): their rows are laid out as they were.
TEST(TraceV1File, TodaysWriterWritesTheSameLayout) {
    TempDir dir;
    const std::string path = dir.file("now.h5");
    {
        TraceMeta m = sample_meta();
        TraceWriter w(path, m);
        w.write(sample_step(0, 1));
        w.close();
    }
    hid_t old_file = H5Fopen(v1_file().c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t new_file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    ASSERT_GE(old_file, 0);
    ASSERT_GE(new_file, 0);
    for (const char* ds : {"/meta/runs", "/meta/linears", "/meta/recipes", "/meta/training_recipes", "/meta/ops",
                           "/meta/gemms", "/meta/operands", "/meta/event_kinds", "/steps", "/events",
                           "/scaling/index", "/scaling/amax", "/scaling/scale", "/operands/table",
                           "/operands/errors", "/operands/histogram", "/operands/channel_absmax", "/operands/top",
                           "/operands/amax_history", "/blockmaps/table", "/blockmaps/absmax",
                           "/blockmaps/scale_inv", "/blockmaps/sqnr_db", "/ops"}) {
        hid_t a = H5Dopen2(old_file, ds, H5P_DEFAULT), b = H5Dopen2(new_file, today(ds).c_str(), H5P_DEFAULT);
        ASSERT_GE(a, 0) << ds;
        ASSERT_GE(b, 0) << ds;
        hid_t ta = H5Dget_type(a), tb = H5Dget_type(b);
        if (std::string(ds) == "/ops") {
            ASSERT_EQ(H5Tget_nmembers(tb), H5Tget_nmembers(ta) + 4);
            for (int i = 0; i < H5Tget_nmembers(ta); ++i) {
                char* name = H5Tget_member_name(ta, unsigned(i));
                const int j = H5Tget_member_index(tb, name);
                ASSERT_GE(j, 0) << name;
                hid_t ma = H5Tget_member_type(ta, unsigned(i)), mb = H5Tget_member_type(tb, unsigned(j));
                EXPECT_GT(H5Tequal(ma, mb), 0) << "/ops." << name << ": the type changed";
                H5Tclose(ma);
                H5Tclose(mb);
                H5free_memory(name);
            }
            for (const char* added : {"kind", "parent", "operand", "bytes"})
                EXPECT_GE(H5Tget_member_index(tb, added), 0) << added;
        } else if (H5Tget_class(ta) == H5T_COMPOUND) {
            expect_same_members(ds, ta, tb);
        } else if (std::string(ds) == "/operands/channel_absmax" || std::string(ds) == "/blockmaps/absmax" ||
                   std::string(ds) == "/blockmaps/sqnr_db") {
            // Since format 5 in bfloat16: still a float, of 2 bytes.
            EXPECT_EQ(H5Tget_class(tb), H5T_FLOAT) << ds;
            EXPECT_EQ(H5Tget_size(tb), 2u) << ds;
        } else {
            EXPECT_GT(H5Tequal(ta, tb), 0) << ds << ": the element type changed";
        }
        hid_t sa = H5Dget_space(a), sb = H5Dget_space(b);
        EXPECT_EQ(H5Sget_simple_extent_ndims(sa), H5Sget_simple_extent_ndims(sb)) << ds;
        H5Sclose(sa);
        H5Sclose(sb);
        H5Tclose(ta);
        H5Tclose(tb);
        H5Dclose(a);
        H5Dclose(b);
    }
    for (const char* attr : {"format", "format_version", "tool_version", "created", "machine", "config",
                             "capture_every", "blockmap_every"}) {
        EXPECT_GT(H5Aexists(old_file, attr), 0) << attr;
        EXPECT_GT(H5Aexists(new_file, attr), 0) << attr;
    }
    H5Fclose(old_file);
    H5Fclose(new_file);
}

}  // namespace
}  // namespace fp8scope::trace
