// A data-parallel trace: which rank wrote it (rank, world_size), the type its gradient
// sums travelled in (grad_dtype) and every rank's share of every step (/ranks) come back
// from the reader as written; a file of format 2, which has none of them, reads as rank 0
// of 1 with no rank records; a format-3 file from before grad_dtype reads without a type,
// and an attribute the reader does not know is passed over; records and metadata that do
// not fit the world are refused on both sides.
#include <gtest/gtest.h>
#include <hdf5.h>

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "h5_patch.h"
#include "old_format.h"
#include "trace_fixture.h"
#include "trace_reader.h"
#include "trace_writer.h"

namespace fp8scope::trace {
namespace {
using namespace testing;

constexpr int kWorld = 4;
constexpr std::int64_t kSteps = 6;

TraceMeta job_meta() {
    TraceMeta m = sample_meta();
    m.rank = 0;
    m.world_size = kWorld;
    m.grad_dtype = "e4m3";
    return m;
}

void delete_attrs(const std::string& path, std::initializer_list<const char*> names) {
    hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    ASSERT_GE(f, 0);
    for (const char* name : names) ASSERT_GE(H5Adelete(f, name), 0) << name;
    H5Fclose(f);
}

// Steps 1..kSteps of run 0, each followed by every rank's record, as rank 0 writes them.
std::vector<RankStepRecord> write_job(const std::string& path) {
    TraceWriter w(path, job_meta());
    std::vector<RankStepRecord> written;
    for (std::int64_t step = 1; step <= kSteps; ++step) {
        w.write(sample_step(0, step));
        for (int rank = 0; rank < kWorld; ++rank) {
            written.push_back(sample_rank_step(step, rank));
            w.write(written.back());
        }
    }
    w.close();
    return written;
}

TEST(TraceRanks, RankRecordsAndTheWritersRankComeBack) {
    TempDir dir;
    const std::string path = dir.file("job.h5");
    const auto written = write_job(path);
    TraceReader r(path);
    EXPECT_EQ(r.meta().format_version, kFormatVersion);
    EXPECT_EQ(r.meta().rank, 0);
    EXPECT_EQ(r.meta().world_size, kWorld);
    EXPECT_EQ(r.meta().grad_dtype, "e4m3");
    const auto got = r.rank_steps();
    ASSERT_EQ(got.size(), static_cast<std::size_t>(kSteps * kWorld));
    for (std::size_t i = 0; i < got.size(); ++i) expect_same(got[i], written[i]);
    // The hand-computed figures of one record: rank 1 at step 3.
    const RankStepRecord& k = got[(3 - 1) * kWorld + 1];
    EXPECT_EQ(k.step, 3);
    EXPECT_EQ(k.rank, 1);
    EXPECT_EQ(k.compute_ms, 131.5);
    EXPECT_EQ(k.comm_ms, 19.75);
    EXPECT_EQ(k.step_ms, 152.25);
    EXPECT_EQ(r.steps(0).size(), static_cast<std::size_t>(kSteps));
}

TEST(TraceRanks, AnotherRanksTraceSaysWhichRankWroteIt) {
    TempDir dir;
    const std::string path = dir.file("rank3.h5");
    TraceMeta m = job_meta();
    m.rank = 3;
    {
        TraceWriter w(path, m);
        w.write(sample_step(0, 1));
        w.close();
    }
    TraceReader r(path);
    EXPECT_EQ(r.meta().rank, 3);
    EXPECT_EQ(r.meta().world_size, kWorld);
    EXPECT_TRUE(r.rank_steps().empty());
}

TEST(TraceRanks, ASingleProcessTraceIsRankZeroOfOneWithoutRankRecords) {
    TempDir dir;
    const std::string path = dir.file("one.h5");
    {
        TraceWriter w(path, sample_meta());
        w.write(sample_step(0, 1));
        w.close();
    }
    TraceReader r(path);
    EXPECT_EQ(r.meta().rank, 0);
    EXPECT_EQ(r.meta().world_size, 1);
    EXPECT_EQ(r.meta().grad_dtype, "");
    EXPECT_TRUE(r.rank_steps().empty());
}

// grad_dtype came within format 3: a job's trace written before it has rank records but
// no type, and still reads as format 3.
TEST(TraceRanks, AFormat3FileWithoutTheGradientTypeReadsWithoutOne) {
    TempDir dir;
    const std::string path = dir.file("before.h5");
    const auto written = write_job(path);
    delete_attrs(path, {"grad_dtype"});
    to_older_format(path, 3);
    TraceReader r(path);
    EXPECT_EQ(r.meta().format_version, 3);
    EXPECT_EQ(r.meta().grad_dtype, "");
    EXPECT_EQ(r.meta().world_size, kWorld);
    ASSERT_EQ(r.rank_steps().size(), written.size());
    expect_same(r.rank_steps().back(), written.back());
}

// What lets a root attribute come without a new format version: a reader passes over one
// it does not know (as a reader from before grad_dtype passes over grad_dtype).
TEST(TraceRanks, AnAttributeTheReaderDoesNotKnowIsPassedOver) {
    TempDir dir;
    const std::string path = dir.file("later.h5");
    write_job(path);
    {
        hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
        ASSERT_GE(f, 0);
        hid_t space = H5Screate(H5S_SCALAR);
        hid_t a = H5Acreate2(f, "grad_bucket_mb", H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT);
        const std::int64_t mb = 25;
        ASSERT_GE(H5Awrite(a, H5T_NATIVE_INT64, &mb), 0);
        H5Aclose(a);
        H5Sclose(space);
        H5Fclose(f);
    }
    TraceReader r(path);
    EXPECT_EQ(r.meta().grad_dtype, "e4m3");
    EXPECT_EQ(r.rank_steps().size(), static_cast<std::size_t>(kSteps * kWorld));
}

// Format 2 had neither the rank attributes nor /ranks: today's file with them removed and
// its version set back is that layout.
TEST(TraceRanks, AVersion2FileReadsAsRankZeroOfOne) {
    TempDir dir;
    const std::string path = dir.file("v2.h5");
    write_job(path);
    delete_attrs(path, {"rank", "world_size", "grad_dtype"});
    to_older_format(path, 2);
    {
        hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
        ASSERT_GE(f, 0);
        ASSERT_GE(H5Ldelete(f, "/ranks", H5P_DEFAULT), 0);
        H5Fclose(f);
    }
    TraceReader r(path);
    EXPECT_EQ(r.meta().format_version, 2);
    EXPECT_EQ(r.meta().rank, 0);
    EXPECT_EQ(r.meta().world_size, 1);
    EXPECT_EQ(r.meta().grad_dtype, "");
    EXPECT_TRUE(r.rank_steps().empty());
    EXPECT_FALSE(r.refresh());  // no /ranks to follow either
    const auto steps = r.steps(0);
    ASSERT_EQ(steps.size(), static_cast<std::size_t>(kSteps));
    StepRecord want = sample_step(0, kSteps);
    want.step_ms = want.step_ms / 1e3 * 1e3;  // the file holds it in seconds
    expect_same(steps.back(), want);
}

TEST(TraceRanks, RecordsAndMetaOutsideTheWorldAreRefused) {
    TempDir dir;
    TraceWriter w(dir.file("job.h5"), job_meta());
    EXPECT_THROW(w.write(sample_rank_step(1, kWorld)), std::invalid_argument);
    EXPECT_THROW(w.write(sample_rank_step(1, -1)), std::invalid_argument);
    EXPECT_NO_THROW(w.write(sample_rank_step(1, kWorld - 1)));
    w.close();

    TraceMeta outside = job_meta();
    outside.rank = kWorld;
    EXPECT_THROW(TraceWriter(dir.file("outside.h5"), outside), TraceError);
    TraceMeta empty_world = job_meta();
    empty_world.world_size = 0;
    EXPECT_THROW(TraceWriter(dir.file("empty.h5"), empty_world), TraceError);
}

TEST(TraceRanks, ADamagedRankIsAClearError) {
    TempDir dir;
    const std::string path = dir.file("job.h5");
    write_job(path);
    ASSERT_TRUE(patch_field(path, "/ranks", "rank", 5, std::int32_t{9}, H5T_NATIVE_INT32));
    try {
        TraceReader r(path);
        FAIL() << "read a rank outside the world";
    } catch (const TraceError& e) {
        EXPECT_NE(std::string(e.what()).find("/ranks row 5: rank 9 is outside world_size 4"), std::string::npos)
            << e.what();
    }

    const std::string meta_path = dir.file("meta.h5");
    write_job(meta_path);
    {
        hid_t f = H5Fopen(meta_path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
        hid_t a = H5Aopen(f, "rank", H5P_DEFAULT);
        const std::int64_t rank = 7;
        ASSERT_GE(H5Awrite(a, H5T_NATIVE_INT64, &rank), 0);
        H5Aclose(a);
        H5Fclose(f);
    }
    try {
        TraceReader r(meta_path);
        FAIL() << "read rank 7 of 4";
    } catch (const TraceError& e) {
        EXPECT_NE(std::string(e.what()).find("rank = 7 is outside [0, 4)"), std::string::npos) << e.what();
    }
}

}  // namespace
}  // namespace fp8scope::trace
