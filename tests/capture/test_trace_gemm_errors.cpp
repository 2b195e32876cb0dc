// The GEMM output errors of a trace (/gemm_error): rows come back from the reader as
// written, per run and in file order, +inf SQNR and NaN included; a file from before the
// dataset reads as having none; a damaged row is refused with an error that names the
// dataset and the row; the writer refuses a record that does not fit the metadata.
#include <gtest/gtest.h>
#include <hdf5.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "h5_patch.h"
#include "trace_fixture.h"
#include "trace_reader.h"
#include "trace_writer.h"

namespace fp8scope::trace {
namespace {
using namespace testing;

constexpr double kInf = std::numeric_limits<double>::infinity();

// Run r, step s, linear l, GEMM g: figures that follow from the indices; run 0 (baseline)
// has no quantized operand, so no error.
GemmErrorRecord sample_gemm_error(int run, std::int64_t step, int linear, Gemm gemm) {
    if (run == 0) return {run, step, linear, gemm, kInf, 0.0, 0.0};
    const double sqnr = 20.0 + linear + 0.25 * static_cast<int>(gemm) + 0.01 * double(step);
    return {run, step, linear, gemm, sqnr, std::pow(10.0, -sqnr / 20.0), 0.5 * (linear + 1)};
}

// Steps 0, 5 of both runs, every linear and GEMM: 2 x 2 x 2 x 3 = 24 rows.
std::vector<GemmErrorRecord> write_trace(const std::string& path) {
    TraceMeta m = sample_meta();
    TraceWriter w(path, m);
    std::vector<GemmErrorRecord> written;
    for (std::int64_t step : {0, 5})
        for (int run = 0; run < 2; ++run) {
            w.write(sample_step(run, step));
            for (int l = 0; l < 2; ++l)
                for (Gemm g : {Gemm::Fprop, Gemm::Dgrad, Gemm::Wgrad}) {
                    written.push_back(sample_gemm_error(run, step, l, g));
                    w.write(written.back());
                }
        }
    w.close();
    return written;
}

std::vector<GemmErrorRecord> of_run(const std::vector<GemmErrorRecord>& all, int run) {
    std::vector<GemmErrorRecord> out;
    for (const auto& g : all)
        if (g.run == run) out.push_back(g);
    return out;
}

// The message of the TraceError opening and reading `path` gives; empty when none.
std::string read_error(const std::string& path) {
    try {
        TraceReader r(path);
        r.gemm_errors(1);
        return {};
    } catch (const TraceError& e) {
        return e.what();
    }
}

TEST(TraceGemmErrors, RowsComeBackPerRunAsWritten) {
    TempDir dir;
    const std::string path = dir.file("t.h5");
    const auto written = write_trace(path);
    TraceReader r(path);
    for (int run = 0; run < 2; ++run) {
        const auto got = r.gemm_errors(run), want = of_run(written, run);
        ASSERT_EQ(got.size(), 12u) << run;
        for (std::size_t i = 0; i < got.size(); ++i) expect_same(got[i], want[i]);
    }
    // One row by hand: run 1, step 5, linear 1 (fc1), wgrad.
    const GemmErrorRecord& g = r.gemm_errors(1).back();
    EXPECT_EQ(g.step, 5);
    EXPECT_EQ(g.linear, 1);
    EXPECT_EQ(g.gemm, Gemm::Wgrad);
    EXPECT_DOUBLE_EQ(g.sqnr_db, 21.55);
    EXPECT_DOUBLE_EQ(g.rel_err, std::pow(10.0, -21.55 / 20.0));
    EXPECT_EQ(g.max_abs_err, 1.0);
    EXPECT_EQ(r.gemm_errors(0).front().sqnr_db, kInf);  // baseline: no error
    EXPECT_TRUE(r.gemm_errors(2).empty());              // no such run
}

TEST(TraceGemmErrors, AFileWithoutTheDatasetHasNoRows) {
    TempDir dir;
    const std::string path = dir.file("old.h5");
    write_trace(path);
    hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    ASSERT_GE(f, 0);
    ASSERT_GE(H5Ldelete(f, "/gemm_error", H5P_DEFAULT), 0);
    H5Fclose(f);
    TraceReader r(path);
    EXPECT_TRUE(r.gemm_errors(0).empty());
    EXPECT_TRUE(r.gemm_errors(1).empty());
    EXPECT_EQ(r.steps(1).size(), 2u);  // the rest reads as before
}

struct Damage {
    const char* field;
    double value;       // written as the field's own type below
    bool integer;       // an int32 (linear, run) or int8 (gemm) column
    const char* named;  // what the message must say besides the dataset and row
};

TEST(TraceGemmErrors, ADamagedRowIsRefusedNamingTheDatasetAndRow) {
    const Damage damages[] = {
        {"linear", 2, true, "linear/gemm 2/"},
        {"linear", -1, true, "linear/gemm -1/"},
        {"gemm", 3, true, "/3 out of range"},
        {"gemm", -1, true, "/-1 out of range"},
        {"run", 7, true, "run"},
        {"rel_err", -0.5, false, "rel_err -0.5"},
        {"max_abs_err", -1, false, "max_abs_err -1"},
        {"sqnr_db", -kInf, false, "sqnr_db -inf"},
    };
    for (const Damage& d : damages) {
        TempDir dir;
        const std::string path = dir.file("bad.h5");
        write_trace(path);
        constexpr hsize_t kRow = 13;  // run 0 at step 5: linear 0, dgrad
        bool patched = false;
        if (!d.integer)
            patched = patch_field(path, "/gemm_error", d.field, kRow, d.value, H5T_NATIVE_DOUBLE);
        else if (std::string(d.field) == "gemm")
            patched = patch_field(path, "/gemm_error", d.field, kRow, static_cast<std::int8_t>(d.value), H5T_NATIVE_INT8);
        else
            patched = patch_field(path, "/gemm_error", d.field, kRow, static_cast<std::int32_t>(d.value), H5T_NATIVE_INT32);
        ASSERT_TRUE(patched) << d.field;
        const std::string e = read_error(path);
        EXPECT_NE(e.find("/gemm_error row 13"), std::string::npos) << d.field << ": " << e;
        EXPECT_NE(e.find(d.named), std::string::npos) << d.field << ": " << e;
        EXPECT_NE(e.find(path), std::string::npos) << d.field << ": " << e;
    }
}

TEST(TraceGemmErrors, TheWriterRefusesARecordOutsideTheMetadata) {
    TempDir dir;
    TraceWriter w(dir.file("w.h5"), sample_meta());
    EXPECT_THROW(w.write(GemmErrorRecord{0, 0, 2, Gemm::Fprop, 30.0, 0.03, 0.1}), std::invalid_argument);  // 2 linears
    EXPECT_THROW(w.write(GemmErrorRecord{5, 0, 0, Gemm::Fprop, 30.0, 0.03, 0.1}), std::invalid_argument);  // 2 runs
    EXPECT_THROW(w.write(GemmErrorRecord{0, 0, 0, Gemm(3), 30.0, 0.03, 0.1}), std::invalid_argument);
    EXPECT_NO_THROW(w.write(GemmErrorRecord{0, 0, 1, Gemm::Wgrad, 30.0, 0.03, 0.1}));
    w.close();
}

}  // namespace
}  // namespace fp8scope::trace
