// A trace of format version 3 reads with today's names and units (old_format.h lists what
// format 4 renamed). The test writes today's sample trace and turns it into the format 3
// layout with the HDF5 C API: names moved back, the step times put in as seconds.
#include <gtest/gtest.h>
#include <hdf5.h>

#include <string>

#include "h5_patch.h"
#include "old_format.h"
#include "trace_fixture.h"
#include "trace_reader.h"
#include "trace_writer.h"

namespace fp8scope::trace {
namespace {
using namespace testing;

constexpr std::int64_t kSteps = 4;

// The step time a format 3 file holds for a row: in seconds.
double seconds_of(hsize_t row) { return 0.125 * double(row + 1); }

// The sample trace as a writer of format 3 wrote it.
std::string write_format3(const TempDir& dir) {
    const std::string path = dir.file("v3.h5");
    {
        const TraceMeta m = sample_meta();
        TraceWriter w(path, m);
        for (std::int64_t step = 0; step < kSteps; ++step)
            for (int run = 0; run < 2; ++run) {
                w.write(sample_step(run, step));
                w.write(sample_scaling(m, run, step));
                w.write(sample_operand(m, {run, step, 1, Gemm::Fprop, Operand::X}));
                for (int q = 0; q < 3; ++q) w.write(sample_blockmap({run, step, 1, Gemm::Dgrad, Operand::DY}, q));
            }
        w.close();
    }
    to_older_format(path, 3);
    for (hsize_t row = 0; row < 2 * kSteps; ++row)
        EXPECT_TRUE(patch_field(path, "/steps", "step_time_s", row, seconds_of(row), H5T_NATIVE_DOUBLE));
    return path;
}

TEST(TraceV3File, ReadsWithTodaysNamesAndMilliseconds) {
    TempDir dir;
    const std::string path = write_format3(dir);
    TraceReader r(path);
    const TraceMeta& m = r.meta();
    const TraceMeta want = sample_meta();
    EXPECT_EQ(m.format_version, 3);
    EXPECT_EQ(m.quantizers, want.quantizers);  // from /meta/recipes
    EXPECT_EQ(m.training_recipes, want.training_recipes);  // from /meta/training_recipes
    ASSERT_FALSE(m.quantizers.empty());
    EXPECT_NE(m.quantizers, m.training_recipes);

    for (int run = 0; run < 2; ++run) {
        const auto steps = r.steps(run);
        ASSERT_EQ(steps.size(), std::size_t(kSteps));
        for (std::int64_t step = 0; step < kSteps; ++step) {
            // Rows went in step by step, both runs per step.
            EXPECT_EQ(steps[step].step_ms, 1e3 * seconds_of(hsize_t(2 * step + run))) << run << " " << step;
            EXPECT_EQ(steps[step].loss, sample_step(run, step).loss);
        }
    }

    const OperandKey key{1, 2, 1, Gemm::Fprop, Operand::X};
    const auto o = r.operand(key);
    ASSERT_TRUE(o);
    const OperandRecord want_o = sample_operand(want, key);
    EXPECT_EQ(o->quantizer_in_use, want_o.quantizer_in_use);
    ASSERT_EQ(o->errors.size(), want.quantizers.size());
    for (std::size_t q = 0; q < o->errors.size(); ++q) {
        EXPECT_EQ(o->errors[q].recipe, want.quantizers[q]);
        EXPECT_EQ(o->errors[q].sqnr_db, want_o.errors[q].sqnr_db);
    }
    const auto points = r.operand_series(1, 1, Gemm::Fprop, Operand::X);
    ASSERT_EQ(points.size(), std::size_t(kSteps));
    EXPECT_EQ(points[2].quantizer_in_use, want_o.quantizer_in_use);

    const auto maps = r.blockmaps({0, 3, 1, Gemm::Dgrad, Operand::DY});
    ASSERT_EQ(maps.size(), 3u);
    for (int q = 0; q < 3; ++q) {
        EXPECT_EQ(maps[q].quantizer, q);
        EXPECT_EQ(maps[q].cols, 192 + q);
    }
}

}  // namespace
}  // namespace fp8scope::trace
