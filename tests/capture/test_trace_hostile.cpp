// Traces with one field set to an extreme value (issue 13, defects 1 and the reader's
// bounds): a histogram min_exponent near INT32_MAX used to wrap past the span check and
// write far out of bounds; a chunk size larger than the file would make HDF5 allocate
// it. The reader refuses both with a TraceError naming the file, and lists the steps
// that have rows so a caller's work follows the rows, not the step range.
#include <gtest/gtest.h>

#include <climits>

#include "capture/h5_patch.h"
#include "trace_fixture.h"
#include "trace_reader.h"
#include "trace_schema.h"
#include "trace_writer.h"

namespace fp8scope::trace {
namespace {
using namespace testing;

// One run, one capture step with one operand (it has histogram bins).
std::string write_small(const TempDir& dir, const std::vector<std::int64_t>& steps = {0}) {
    std::string path = dir.file("small.h5");
    TraceMeta m = sample_meta();
    TraceWriter w(path, m);
    for (std::int64_t s : steps) {
        w.write(sample_step(0, s));
        w.write(sample_scaling(m, 0, s));
        w.write(sample_op(0, s, 1));
    }
    w.write(sample_operand(m, {0, steps.front(), 0, Gemm::Fprop, Operand::X}));
    w.close();
    return path;
}

std::string read_operand_error(const std::string& path) {
    try {
        TraceReader r(path);
        r.operands(0, r.capture_steps(0).at(0));
        r.operand_series(0, 0, Gemm::Fprop, Operand::X);
    } catch (const TraceError& e) {
        return e.what();
    }
    return "";
}

TEST(TraceHostile, HistogramMinExponentNearInt32MaxIsRefused) {
    TempDir dir;
    const std::string path = write_small(dir);
    for (std::int32_t min_exp : {INT32_MAX, INT32_MAX - 100, INT32_MIN}) {
        ASSERT_TRUE(patch_field(path, schema::kOperands, "hist_min_exp", 0, min_exp, H5T_NATIVE_INT32));
        const std::string e = read_operand_error(path);
        EXPECT_NE(e.find(path), std::string::npos) << e;
        EXPECT_NE(e.find("histogram span (min_exp " + std::to_string(min_exp)), std::string::npos) << e;
    }
}

TEST(TraceHostile, RowStepsFollowTheRowsNotTheRange) {
    TempDir dir;
    const std::string path = write_small(dir, {0, 1, INT64_MAX, INT64_MIN});
    TraceReader r(path);
    EXPECT_EQ(r.row_steps(0, INT64_MIN, INT64_MAX), (std::vector<std::int64_t>{INT64_MIN, 0, 1, INT64_MAX}));
    EXPECT_EQ(r.row_steps(0, 1, INT64_MAX), (std::vector<std::int64_t>{1, INT64_MAX}));
    EXPECT_TRUE(r.row_steps(1, INT64_MIN, INT64_MAX).empty());
    EXPECT_TRUE(r.row_steps(-5, INT64_MIN, INT64_MAX).empty());
    EXPECT_EQ(r.scaling(0, INT64_MAX, INT64_MAX).size(), 1u);
}

// A damaged block-map or op row is refused when the file opens, not when a reader first
// reads the row: inspect (which reads neither), export (ops) and the GUI (both) used to give
// three verdicts on one file.
TEST(TraceHostile, DamagedBlockMapAndOpRowsAreRefusedWhenTheFileOpens) {
    struct Damage {
        const char* dataset;
        const char* field;
        std::int64_t value;
        std::string says;
    };
    const Damage cases[] = {
        {schema::kBlockMaps, "quantizer", 99, "/blockmaps/table row 1: quantizer 99 is not in the quantizer table"},
        {schema::kBlockMaps, "grid_rows", -2, "/blockmaps/table row 1: grid -2x7 does not match count 14"},
        {schema::kBlockMaps, "count", INT64_MAX, "/blockmaps/table row 1: grid 2x7 does not match count"},
        {schema::kBlockMaps, "offset", INT64_MAX / 2, "/blockmaps/table row 1: (offset 4611686018427387903, count 14) "
                                                      "points past the end of /blockmaps/absmax"},
        {schema::kOpTimes, "op", 9999, "/ops row 1: op 9999 (parent"},
        {schema::kOpTimes, "parent", 9999, ") is not in /meta/ops"},
    };
    for (const Damage& d : cases) {
        TempDir dir;
        const std::string path = dir.file("damaged.h5");
        {
            TraceMeta m = sample_meta();
            TraceWriter w(path, m);
            w.write(sample_step(0, 10));
            w.write(sample_op(0, 10, 0));
            w.write(sample_op(0, 10, 1));
            for (int q : {0, 1}) w.write(sample_blockmap({0, 10, 0, Gemm::Fprop, Operand::X}, q));
            w.close();
            TraceReader valid(path);  // the file as written is valid
            ASSERT_EQ(valid.blockmaps({0, 10, 0, Gemm::Fprop, Operand::X}).size(), 2u);
        }
        ASSERT_TRUE(patch_field(path, d.dataset, d.field, 1, d.value, H5T_NATIVE_INT64)) << d.field;
        std::string opened;
        try {
            TraceReader r(path);
        } catch (const TraceError& e) {
            opened = e.what();
        }
        EXPECT_EQ(opened.rfind(path + ": ", 0), 0u) << d.field << ": " << opened;
        EXPECT_NE(opened.find(d.says), std::string::npos) << d.field << ": " << opened;
    }
}

TEST(TraceHostile, OperandSlotOfAHugeLinearIsNone) {
    EXPECT_EQ(operand_slot(INT32_MAX, Gemm::Fprop, Operand::X), -1);
    EXPECT_EQ(operand_slot(INT32_MAX / kOperandsPerLinear - 1, Gemm::Fprop, Operand::X) >= 0, true);
}

}  // namespace
}  // namespace fp8scope::trace
