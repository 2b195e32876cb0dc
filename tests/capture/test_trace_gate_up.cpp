// The gate/up alignment table of a trace (/gate_up_alignment, format 7): rows come back
// per run as written, NaN included; a format 6 file has none; a damaged row is refused
// naming the dataset and row; compact carries the rows.
#include <gtest/gtest.h>
#include <hdf5.h>

#include <cmath>
#include <string>
#include <vector>

#include "h5_patch.h"
#include "trace_compact.h"
#include "trace_fixture.h"
#include "trace_reader.h"
#include "trace_writer.h"

namespace fp8scope::trace {
namespace {
using namespace testing;

// Figures that follow from the indices; linear 1 is the fixture's blocks.0.mlp.fc1.
GateUpAlignmentRecord sample_alignment(int run, std::int64_t step) {
    GateUpAlignmentRecord a;
    a.run = run;
    a.step = step;
    a.linear = 1;
    a.channels = 128;
    a.mean_abs_cos = 0.02 + 0.001 * double(step);
    a.p99_abs_cos = 0.1 + 0.01 * run;
    a.max_abs_cos = 0.2 + 0.01 * double(step);
    a.aligned = step / 5;
    a.top_channel = 17 + run;
    a.top_cos = -0.15;
    a.top_norm_product = 1.5;
    a.top_down_amax = run == 0 ? kNone : 12.5;  // fc2's input not captured: NaN
    a.down_amax_median = run == 0 ? kNone : 0.75;
    return a;
}

std::vector<GateUpAlignmentRecord> write_trace(const std::string& path) {
    TraceWriter w(path, sample_meta());
    std::vector<GateUpAlignmentRecord> written;
    for (std::int64_t step : {1, 6, 11})
        for (int run = 0; run < 2; ++run) {
            w.write(sample_step(run, step));
            written.push_back(sample_alignment(run, step));
            w.write(written.back());
        }
    w.close();
    return written;
}

std::string read_error(const std::string& path) {
    try {
        TraceReader r(path);
        r.gate_up_alignment(1);
        return {};
    } catch (const TraceError& e) {
        return e.what();
    }
}

// Deletes /gate_up_alignment; a `version` above 0 becomes the file's format_version.
void drop_table(const std::string& path, std::int64_t version) {
    hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    ASSERT_GE(f, 0);
    ASSERT_GE(H5Ldelete(f, "/gate_up_alignment", H5P_DEFAULT), 0);
    if (version > 0) {
        hid_t attr = H5Aopen(f, "format_version", H5P_DEFAULT);
        EXPECT_GE(H5Awrite(attr, H5T_NATIVE_INT64, &version), 0);
        H5Aclose(attr);
    }
    H5Fclose(f);
}

TEST(TraceGateUp, RowsComeBackPerRunAsWritten) {
    TempDir dir;
    const std::string path = dir.file("t.h5");
    const auto written = write_trace(path);
    TraceReader r(path);
    for (int run = 0; run < 2; ++run) {
        const auto got = r.gate_up_alignment(run);
        ASSERT_EQ(got.size(), 3u);
        for (std::size_t i = 0; i < got.size(); ++i) expect_same(got[i], written[i * 2 + std::size_t(run)]);
    }
    const GateUpAlignmentRecord& a = r.gate_up_alignment(1).back();
    EXPECT_EQ(a.step, 11);
    EXPECT_EQ(a.top_channel, 18);
    EXPECT_DOUBLE_EQ(a.max_abs_cos, 0.31);
    EXPECT_EQ(a.aligned, 2);
    EXPECT_TRUE(std::isnan(r.gate_up_alignment(0).front().top_down_amax));
    EXPECT_TRUE(r.gate_up_alignment(2).empty());
}

TEST(TraceGateUp, AFormat6FileHasNoRows) {
    TempDir dir;
    const std::string path = dir.file("old.h5");
    write_trace(path);
    drop_table(path, 6);
    TraceReader r(path);
    EXPECT_EQ(r.meta().format_version, 6);
    EXPECT_TRUE(r.gate_up_alignment(1).empty());
    EXPECT_EQ(r.steps(1).size(), 3u);
}

TEST(TraceGateUp, AFormat7FileWithoutTheDatasetIsDamaged) {
    TempDir dir;
    const std::string path = dir.file("cut.h5");
    write_trace(path);
    drop_table(path, 0);
    EXPECT_NE(read_error(path).find("/gate_up_alignment"), std::string::npos) << read_error(path);
}

TEST(TraceGateUp, ADamagedRowIsRefusedNamingTheDatasetAndRow) {
    struct Damage {
        const char* field;
        double value;
        hid_t type;  // of the column
        const char* named;
    };
    const Damage damages[] = {
        {"linear", 2, H5T_NATIVE_INT32, "linear 2 out of range"},
        {"run", 7, H5T_NATIVE_INT32, "run"},
        {"top_channel", 128, H5T_NATIVE_INT64, "top_channel 128"},
        {"aligned", 129, H5T_NATIVE_INT64, "aligned 129"},
        {"max_abs_cos", 1.5, H5T_NATIVE_DOUBLE, "cosine 1.5"},
        {"top_cos", -2, H5T_NATIVE_DOUBLE, "cosine -2"},
    };
    for (const Damage& d : damages) {
        TempDir dir;
        const std::string path = dir.file("bad.h5");
        write_trace(path);
        constexpr hsize_t kRow = 3;  // run 1 at step 6
        const bool patched = d.type == H5T_NATIVE_DOUBLE ? patch_field(path, "/gate_up_alignment", d.field, kRow, d.value, d.type)
                             : d.type == H5T_NATIVE_INT64
                                 ? patch_field(path, "/gate_up_alignment", d.field, kRow, std::int64_t(d.value), d.type)
                                 : patch_field(path, "/gate_up_alignment", d.field, kRow, std::int32_t(d.value), d.type);
        ASSERT_TRUE(patched) << d.field;
        const std::string e = read_error(path);
        EXPECT_NE(e.find("/gate_up_alignment row 3"), std::string::npos) << d.field << ": " << e;
        EXPECT_NE(e.find(d.named), std::string::npos) << d.field << ": " << e;
    }
}

TEST(TraceGateUp, CompactCarriesTheRows) {
    TempDir dir;
    const std::string in = dir.file("in.h5"), out = dir.file("out.h5");
    write_trace(in);
    const CompactCounts n = compact_trace(in, out);
    EXPECT_EQ(n.gate_up, 6u);
    EXPECT_EQ(compare_traces(in, out), "");
    EXPECT_EQ(TraceReader(out).gate_up_alignment(0).size(), 3u);
}

}  // namespace
}  // namespace fp8scope::trace
