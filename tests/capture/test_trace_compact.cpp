// Format 5's storage (docs/trace-format.md, "Storage"): deflated chunks and bfloat16
// figures, a format 4 file (float32, uncompressed) still read exactly, and `compact`,
// which rewrites any trace in today's format and checks that it reads back the same.
#include <gtest/gtest.h>
#include <hdf5.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "old_format.h"
#include "trace_compact.h"
#include "trace_fixture.h"
#include "trace_reader.h"
#include "trace_schema.h"
#include "trace_writer.h"

namespace fp8scope::trace {
namespace {
using namespace testing;

constexpr int kRuns = 2;
constexpr std::int64_t kSteps = 100, kCaptureEvery = 10, kOpsPerStep = 200;
constexpr int kChannels = 4096;

// A run with channels and ops in the numbers of a real one: captures of kChannels
// channels whose absmax varies smoothly, kOpsPerStep timed ops a step.
OperandRecord wide_operand(const TraceMeta& m, OperandKey key) {
    OperandRecord o = sample_operand(m, key);
    o.stats.outliers.channel_absmax.resize(kChannels);
    for (int c = 0; c < kChannels; ++c)
        o.stats.outliers.channel_absmax[c] = 0.01f * float(1 + (c * 37 + key.step) % 300) * (c % 97 == 0 ? 40.f : 1.f);
    return o;
}
OpRecord timed_op(int run, std::int64_t step, int i) {
    OpRecord op = sample_op(run, step, i % 2);
    op.start_ns = step * 1'000'000 + i * 9000;
    op.end_ns = op.start_ns + 7000 + (i * 131) % 900;
    return op;
}

struct Written {
    std::uint64_t channel_floats = 0, block_cells = 0, ops = 0;
};
Written write_run(const std::string& path, TraceWriterOptions options = {}) {
    Written n;
    const TraceMeta m = sample_meta();
    TraceWriter w(path, m, options);
    for (std::int64_t step = 0; step < kSteps; ++step)
        for (int run = 0; run < kRuns; ++run) {
            w.write(sample_step(run, step));
            w.write(sample_scaling(m, run, step));
            for (int i = 0; i < kOpsPerStep; ++i, ++n.ops) w.write(timed_op(run, step, i));
            if (step % kCaptureEvery) continue;
            for (int l = 0; l < 2; ++l) {
                const OperandRecord o = wide_operand(m, {run, step, l, Gemm::Fprop, Operand::X});
                n.channel_floats += o.stats.outliers.channel_absmax.size();
                w.write(o);
            }
            for (int q = 0; q < 3; ++q) {
                const BlockMapRecord b = sample_blockmap({run, step, 1, Gemm::Dgrad, Operand::DY}, q);
                n.block_cells += b.absmax.size();
                w.write(b);
            }
        }
    w.close();
    return n;
}

std::vector<char> bytes_of(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(f), {}};
}

// The filters of one dataset, by HDF5 id.
std::vector<H5Z_filter_t> filters_of(const std::string& path, const char* dataset) {
    std::vector<H5Z_filter_t> ids;
    hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t d = H5Dopen2(f, dataset, H5P_DEFAULT);
    hid_t dcpl = H5Dget_create_plist(d);
    for (int i = 0; i < H5Pget_nfilters(dcpl); ++i) {
        unsigned flags = 0;
        std::size_t n = 0;
        ids.push_back(H5Pget_filter2(dcpl, unsigned(i), &flags, &n, nullptr, 0, nullptr, nullptr));
    }
    H5Pclose(dcpl);
    H5Dclose(d);
    H5Fclose(f);
    return ids;
}

// Row `row` of /operands/channel_absmax, as float, changed in place by `change`.
template <class F>
void change_channel_absmax(const std::string& path, hsize_t row, F change) {
    hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    hid_t d = H5Dopen2(f, schema::kOperandChannelAbsmax, H5P_DEFAULT);
    hid_t space = H5Dget_space(d);
    hsize_t count = 1;
    hid_t one = H5Screate_simple(1, &count, nullptr);
    H5Sselect_hyperslab(space, H5S_SELECT_SET, &row, nullptr, &count, nullptr);
    float v = 0;
    EXPECT_GE(H5Dread(d, H5T_NATIVE_FLOAT, one, space, H5P_DEFAULT, &v), 0);
    change(v);
    EXPECT_GE(H5Dwrite(d, H5T_NATIVE_FLOAT, one, space, H5P_DEFAULT, &v), 0);
    H5Sclose(one);
    H5Sclose(space);
    H5Dclose(d);
    H5Fclose(f);
}

TEST(TraceCompact, SpanDataAndOpsAreShuffledAndDeflatedAndTheRowTablesAreNot) {
    TempDir dir;
    const std::string path = dir.file("run.h5");
    write_run(path);
    const std::vector<H5Z_filter_t> deflated = {H5Z_FILTER_SHUFFLE, H5Z_FILTER_DEFLATE};
    for (const char* d : {schema::kOperandHistogram, schema::kOperandErrors, schema::kOperandChannelAbsmax,
                          schema::kOperandTop, schema::kOperandAmaxHistory, schema::kBlockAbsmax,
                          schema::kBlockScaleInv, schema::kBlockSqnr, schema::kOpTimes})
        EXPECT_EQ(filters_of(path, d), deflated) << d;
    // Read by position and followed live: written in place at every flush.
    for (const char* d : {schema::kSteps, schema::kEvents, schema::kScalingIndex, schema::kScalingAmax,
                          schema::kOperands, schema::kBlockMaps})
        EXPECT_TRUE(filters_of(path, d).empty()) << d;
}

TEST(TraceCompact, FileIsSmallerThanItsLargestTablesRaw) {
    TempDir dir;
    const std::string path = dir.file("run.h5");
    const Written n = write_run(path);
    // What channel absmax, the three block maps and the ops take uncompressed in float32
    // (format 4). bfloat16 halves the first and two of the maps; shuffle and deflate take
    // the ops' repeated ids and steady timestamps to a fraction (a tenth on an H200 run).
    // So the whole file, its small uncompressed tables and HDF5's metadata included, stays
    // under half of these alone.
    const std::uint64_t raw = n.channel_floats * 4 + n.block_cells * 3 * 4 + n.ops * schema::layout<schema::OpTable>().size;
    EXPECT_LT(std::filesystem::file_size(path), raw / 2) << "raw " << raw;
    TraceReader r(path);
    ASSERT_EQ(r.ops(0, INT64_MIN, INT64_MAX).size(), std::size_t(kSteps * kOpsPerStep));
    const auto o = r.operand({1, 30, 0, Gemm::Fprop, Operand::X});
    ASSERT_TRUE(o.has_value());
    expect_same(*o, as_stored(wide_operand(sample_meta(), o->key)));
}

// Flushes every few milliseconds: every compressed chunk is still written once (a rewritten
// one would take new space each time under SWMR), so the file is as small as one written
// in a single flush, but for the chunks of zeros each flush pads with.
TEST(TraceCompact, FrequentFlushesDoNotGrowTheFile) {
    TempDir dir;
    const std::string once = dir.file("once.h5"), often = dir.file("often.h5");
    write_run(once, {.flush_interval = std::chrono::hours(1)});
    TraceWriterOptions fast{.flush_interval = std::chrono::milliseconds(1), .queue_capacity = 64};
    write_run(often, fast);
    EXPECT_LT(std::filesystem::file_size(often), std::filesystem::file_size(once) * 5 / 4)
        << std::filesystem::file_size(once);
    EXPECT_EQ(compare_traces(once, often), "");
}

TEST(TraceCompact, Format4FileReadsExactlyAndCompactsWithinBfloat16) {
    TempDir dir;
    const std::string v4 = dir.file("v4.h5"), out = dir.file("v5.h5");
    write_run(v4);
    to_format4(v4);
    // A channel absmax bfloat16 cannot hold: format 4 gives it back exactly.
    const float exact = 1.2345678f;
    change_channel_absmax(v4, 0, [&](float& v) { v = exact; });
    EXPECT_TRUE(filters_of(v4, schema::kOpTimes).empty());
    const OperandKey first{0, 0, 0, Gemm::Fprop, Operand::X};
    {
        TraceReader r(v4);
        EXPECT_EQ(r.meta().format_version, 4);
        EXPECT_EQ(r.operand(first)->stats.outliers.channel_absmax.at(0), exact);
    }
    const CompactCounts n = compact_trace(v4, out);
    EXPECT_EQ(n.steps, std::uint64_t(kRuns * kSteps));
    EXPECT_EQ(n.ops, std::uint64_t(kRuns * kSteps * kOpsPerStep));
    EXPECT_EQ(n.operands, std::uint64_t(kRuns * 2 * kSteps / kCaptureEvery));
    EXPECT_EQ(compare_traces(v4, out), "");
    EXPECT_LT(std::filesystem::file_size(out), std::filesystem::file_size(v4) / 2);
    TraceReader r(out);
    EXPECT_EQ(r.meta().format_version, kFormatVersion);
    const float got = r.operand(first)->stats.outliers.channel_absmax.at(0);
    EXPECT_EQ(got, as_bfloat16(exact));
    EXPECT_NE(got, exact);
}

TEST(TraceCompact, ComparisonFindsAFigureBeyondBfloat16Rounding) {
    TempDir dir;
    const std::string a = dir.file("a.h5"), b = dir.file("b.h5");
    write_run(a);
    compact_trace(a, b);
    ASSERT_EQ(compare_traces(a, b), "");
    // One channel's absmax 1 % off: more than bfloat16's rounding (at most 0.4 %).
    change_channel_absmax(b, 5, [](float& v) { v *= 1.01f; });
    EXPECT_NE(compare_traces(a, b).find("channel absmax differs"), std::string::npos) << compare_traces(a, b);
}

TEST(TraceCompact, RefusesToWriteItsInput) {
    TempDir dir;
    const std::string path = dir.file("run.h5");
    write_run(path);
    const std::vector<char> before = bytes_of(path);
    const std::string same = (std::filesystem::path(path).parent_path() / "." / "run.h5").string();
    for (const std::string& out : {path, same}) {
        std::string e;
        try {
            compact_trace(path, out);
        } catch (const TraceError& x) {
            e = x.what();
        }
        EXPECT_NE(e.find("never overwrites its input"), std::string::npos) << out << ": " << e;
    }
    EXPECT_EQ(bytes_of(path), before);
}

}  // namespace
}  // namespace fp8scope::trace
