// The file layout as other tools see it: read with the HDF5 C API directly (not the
// project's reader) and with h5dump, the way h5py and HDFView would open it.
#include <gtest/gtest.h>
#include <hdf5.h>

#include <array>
#include <cstdio>
#include <cstring>
#include <memory>

#include "trace_fixture.h"
#include "trace_writer.h"

namespace fp8scope::trace {
namespace {
using namespace testing;

std::string read_vlen_attr(hid_t file, const char* name) {
    hid_t a = H5Aopen(file, name, H5P_DEFAULT);
    EXPECT_GE(a, 0) << name;
    hid_t t = H5Aget_type(a);
    char* p = nullptr;
    EXPECT_GE(H5Aread(a, t, &p), 0);
    std::string s = p ? p : "";
    H5free_memory(p);
    H5Tclose(t);
    H5Aclose(a);
    return s;
}

class TraceLayout : public ::testing::Test {
protected:
    void SetUp() override {
        path = dir.file("layout.h5");
        TraceMeta m = sample_meta();
        TraceWriter w(path, m);
        for (std::int64_t s = 0; s < 3; ++s) w.write(sample_step(0, s));
        w.write(sample_operand(m, {1, 4, 1, Gemm::Wgrad, Operand::X}));
        w.close();
        file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);  // a plain open, as h5py does
        ASSERT_GE(file, 0);
    }
    void TearDown() override {
        if (file >= 0) H5Fclose(file);
    }
    TempDir dir;
    std::string path;
    hid_t file = -1;
};

TEST_F(TraceLayout, RootAttributesIdentifyTheFormat) {
    EXPECT_EQ(read_vlen_attr(file, "format"), "fp8scope-trace");
    EXPECT_EQ(read_vlen_attr(file, "tool_version"), "fp8scope 0.1.0-test");
    EXPECT_EQ(read_vlen_attr(file, "config"), sample_meta().config_json);
    std::int64_t v = 0;
    hid_t a = H5Aopen(file, "format_version", H5P_DEFAULT);
    ASSERT_GE(H5Aread(a, H5T_NATIVE_INT64, &v), 0);
    H5Aclose(a);
    EXPECT_EQ(v, kFormatVersion);
    H5F_info2_t info;
    ASSERT_GE(H5Fget_info2(file, &info), 0);
    EXPECT_GE(info.super.version, 3u);  // the superblock SWMR needs
}

TEST_F(TraceLayout, StepsAreAChunkedExtensibleCompoundTable) {
    hid_t d = H5Dopen2(file, "/steps", H5P_DEFAULT);
    ASSERT_GE(d, 0);
    hid_t dcpl = H5Dget_create_plist(d);
    EXPECT_EQ(H5Pget_layout(dcpl), H5D_CHUNKED);
    H5Pclose(dcpl);
    hid_t space = H5Dget_space(d);
    hsize_t dims[1], maxdims[1];
    ASSERT_EQ(H5Sget_simple_extent_dims(space, dims, maxdims), 1);
    EXPECT_EQ(dims[0], 3u);
    EXPECT_EQ(maxdims[0], H5S_UNLIMITED);
    H5Sclose(space);
    // Read one field by name, as numpy's f['steps']['loss'] does.
    hid_t t = H5Tcreate(H5T_COMPOUND, sizeof(double));
    H5Tinsert(t, "loss", 0, H5T_NATIVE_DOUBLE);
    std::array<double, 3> loss{};
    ASSERT_GE(H5Dread(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, loss.data()), 0);
    for (int s = 0; s < 3; ++s) EXPECT_EQ(loss[s], sample_step(0, s).loss);
    H5Tclose(t);
    H5Dclose(d);
}

TEST_F(TraceLayout, NameTablesAreFixedLengthStrings) {
    hid_t d = H5Dopen2(file, "/meta/quantizers", H5P_DEFAULT);
    ASSERT_GE(d, 0);
    hid_t ft = H5Dget_type(d);
    ASSERT_EQ(H5Tget_class(ft), H5T_COMPOUND);
    hid_t st = H5Tget_member_type(ft, H5Tget_member_index(ft, "name"));
    EXPECT_EQ(H5Tget_class(st), H5T_STRING);
    EXPECT_EQ(H5Tis_variable_str(st), 0);
    std::size_t n = H5Tget_size(st);
    hid_t mt = H5Tcreate(H5T_COMPOUND, n);
    H5Tinsert(mt, "name", 0, st);
    std::vector<char> buf(n * 3);
    ASSERT_GE(H5Dread(d, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf.data()), 0);
    auto m = sample_meta();
    for (int i = 0; i < 3; ++i) EXPECT_EQ(std::string(buf.data() + i * n, strnlen(buf.data() + i * n, n)), m.quantizers[i]);
    H5Tclose(mt);
    H5Tclose(st);
    H5Tclose(ft);
    H5Dclose(d);
}

TEST_F(TraceLayout, HistogramSpanIsFoundThroughOffsetAndCount) {
    struct Cols {
        std::int32_t min_exp;
        std::uint64_t offset, count;
    } c{};
    hid_t d = H5Dopen2(file, "/operands/table", H5P_DEFAULT);
    hid_t t = H5Tcreate(H5T_COMPOUND, sizeof(Cols));
    H5Tinsert(t, "hist_min_exp", offsetof(Cols, min_exp), H5T_NATIVE_INT32);
    H5Tinsert(t, "hist_offset", offsetof(Cols, offset), H5T_NATIVE_UINT64);
    H5Tinsert(t, "hist_count", offsetof(Cols, count), H5T_NATIVE_UINT64);
    ASSERT_GE(H5Dread(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, &c), 0);
    H5Tclose(t);
    H5Dclose(d);
    hid_t h = H5Dopen2(file, "/operands/histogram", H5P_DEFAULT);
    std::vector<std::int64_t> bins(c.count);
    hid_t space = H5Dget_space(h);
    hsize_t start = c.offset, count = c.count;
    H5Sselect_hyperslab(space, H5S_SELECT_SET, &start, nullptr, &count, nullptr);
    hid_t mem = H5Screate_simple(1, &count, nullptr);
    ASSERT_GE(H5Dread(h, H5T_NATIVE_INT64, mem, space, H5P_DEFAULT, bins.data()), 0);
    H5Sclose(mem);
    H5Sclose(space);
    H5Dclose(h);
    OperandRecord want = sample_operand(sample_meta(), {1, 4, 1, Gemm::Wgrad, Operand::X});
    for (int e = kHistMinExp; e <= kHistMaxExp; ++e) {
        std::int64_t got = e >= c.min_exp && e < c.min_exp + static_cast<int>(c.count) ? bins[e - c.min_exp] : 0;
        EXPECT_EQ(got, want.stats.histogram.count(e)) << "exponent " << e;
    }
}

TEST_F(TraceLayout, H5dumpReadsIt) {
    std::string cmd = "h5dump -d /meta/quantizers " + path + " 2>&1";
    std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(cmd.c_str(), "r"), pclose);
    ASSERT_TRUE(pipe);
    std::string out;
    char buf[4096];
    while (std::size_t n = fread(buf, 1, sizeof buf, pipe.get())) out.append(buf, n);
    int status = pclose(pipe.release());
    if (WIFEXITED(status) && WEXITSTATUS(status) == 127) GTEST_SKIP() << "h5dump is not installed";
    EXPECT_EQ(status, 0) << out;
    EXPECT_NE(out.find("\"block1x128_e4m3_pow2"), std::string::npos) << out;
}

}  // namespace
}  // namespace fp8scope::trace
