// The `analyze` report read back: every figure the writer stored, names of tensors and
// quantizers in order; foreign, newer and damaged files raise TraceError naming the file.
#include <gtest/gtest.h>

#include <hdf5.h>

#include <fstream>

#include "analysis_report_reader.h"
#include "trace_fixture.h"

namespace fp8scope {
namespace {
using trace::testing::expect_same;
using trace::testing::TempDir;
using trace::TraceError;

TensorAnalysis sample_tensor(int i, const std::vector<std::string>& recipes) {
    TensorAnalysis t;
    t.file = "weights_" + std::to_string(i) + ".npy";
    t.name = "blocks." + std::to_string(i) + ".mlp.fc1.weight";
    t.dtype = "float32";
    t.shape = {4, 16 + i, 32};
    TensorStats& s = t.analysis.tensor;
    s.numel = 4 * (16 + i) * 32;
    s.finite = s.numel - 1;
    s.nan = 1;
    s.amax = 3.5 + i;
    s.min_nonzero_abs = 1e-7;
    s.mean = 0.01 * i;
    s.rms = 0.7;
    s.stddev = 0.69;
    s.dynamic_range = 25.0;
    s.outliers.kurtosis = 3.0 + i;
    s.outliers.k = 6;
    s.outliers.frac_beyond_k_rms = 1e-3;
    for (int e = -20; e <= 1; ++e) s.histogram.bins[e - kHistMinExp] = 100 + e + i;
    s.histogram.zero = 5;
    s.histogram.nan = 1;
    for (int c = 0; c < 32; ++c) s.outliers.channel_absmax.push_back(0.5f + c + i);
    s.outliers.top = {{3.5f, 1, 7}, {-3.25f, 2, 9}};
    for (std::size_t r = 0; r < recipes.size(); ++r) {
        ErrorStats e;
        e.recipe = recipes[r];
        e.amax = s.amax;
        e.sqnr_db = 30.0 + r - i;
        e.mse = 1e-4 * (r + 1);
        e.underflow_pct = 0.5 * r;
        e.cosine = 0.999;
        e.nonfinite_out = static_cast<std::int64_t>(r);
        t.analysis.errors.push_back(e);
    }
    return t;
}

TEST(AnalysisReportReader, EveryFigureComesBack) {
    TempDir dir;
    const std::string path = dir.file("report.h5");
    const std::vector<std::string> quantizers{"current_e4m3", "block1x128_e4m3_pow2", "mxfp8_e4m3_rceil"};
    std::vector<TensorAnalysis> tensors;
    for (int i = 0; i < 12; ++i) tensors.push_back(sample_tensor(i, quantizers));  // "10" sorts before "2"
    write_analysis_report(path, "fp8scope 0.1.0-test", quantizers, tensors);
    ASSERT_TRUE(is_analysis_report(path));
    const AnalysisReport r = read_analysis_report(path);
    EXPECT_EQ(r.tool_version, "fp8scope 0.1.0-test");
    EXPECT_EQ(r.quantizers, quantizers);
    ASSERT_EQ(r.tensors.size(), tensors.size());
    for (std::size_t i = 0; i < tensors.size(); ++i) {
        EXPECT_EQ(r.tensors[i].file, tensors[i].file);
        EXPECT_EQ(r.tensors[i].name, tensors[i].name);
        EXPECT_EQ(r.tensors[i].dtype, tensors[i].dtype);
        EXPECT_EQ(r.tensors[i].shape, tensors[i].shape);
        expect_same(r.tensors[i].analysis.tensor, tensors[i].analysis.tensor);
        ASSERT_EQ(r.tensors[i].analysis.errors.size(), quantizers.size());
        for (std::size_t k = 0; k < quantizers.size(); ++k)
            expect_same(r.tensors[i].analysis.errors[k], tensors[i].analysis.errors[k]);
    }
}

// Format 1 named the quantizers "recipes" at the root; such a report still reads, its
// quantizer names from that attribute.
TEST(AnalysisReportReader, Version1ReadsItsRecipesAttribute) {
    TempDir dir;
    const std::string path = dir.file("v1.h5");
    const std::vector<std::string> quantizers{"current_e4m3", "mxfp8_e4m3_rceil"};
    write_analysis_report(path, "t", quantizers, {sample_tensor(0, quantizers)});
    {
        hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
        ASSERT_GE(H5Arename(f, "quantizers", "recipes"), 0);
        hid_t a = H5Aopen(f, "format_version", H5P_DEFAULT);
        const std::int64_t v = 1;
        H5Awrite(a, H5T_NATIVE_INT64, &v);
        H5Aclose(a);
        H5Fclose(f);
    }
    const AnalysisReport r = read_analysis_report(path);
    EXPECT_EQ(r.quantizers, quantizers);
    ASSERT_EQ(r.tensors.size(), 1u);
    ASSERT_EQ(r.tensors[0].analysis.errors.size(), 2u);
    EXPECT_EQ(r.tensors[0].analysis.errors[1].recipe, "mxfp8_e4m3_rceil");
    expect_same(r.tensors[0].analysis.errors[1], sample_tensor(0, quantizers).analysis.errors[1]);

    // The same file at version 2 lacks the "quantizers" attribute: refused.
    {
        hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
        hid_t a = H5Aopen(f, "format_version", H5P_DEFAULT);
        const std::int64_t v = 2;
        H5Awrite(a, H5T_NATIVE_INT64, &v);
        H5Aclose(a);
        H5Fclose(f);
    }
    EXPECT_THROW(read_analysis_report(path), TraceError);
}

TEST(AnalysisReportReader, OtherFilesAreRefusedWithTheirName) {
    TempDir dir;
    const std::string text = dir.file("text.h5"), trace_path = dir.file("trace.h5"), cut = dir.file("cut.h5");
    std::ofstream(text) << "not hdf5";
    EXPECT_FALSE(is_analysis_report(text));
    EXPECT_FALSE(is_analysis_report(dir.file("missing.h5")));
    EXPECT_THROW(read_analysis_report(text), TraceError);

    // A newer format version.
    const std::string newer = dir.file("newer.h5");
    write_analysis_report(newer, "t", {"current_e4m3"}, {sample_tensor(0, {"current_e4m3"})});
    {
        hid_t f = H5Fopen(newer.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
        hid_t a = H5Aopen(f, "format_version", H5P_DEFAULT);
        const std::int64_t v = kAnalysisFormatVersion + 1;
        H5Awrite(a, H5T_NATIVE_INT64, &v);
        H5Aclose(a);
        H5Fclose(f);
    }
    try {
        read_analysis_report(newer);
        ADD_FAILURE() << "a newer report was read";
    } catch (const TraceError& e) {
        EXPECT_NE(std::string(e.what()).find(newer), std::string::npos);
        EXPECT_NE(std::string(e.what()).find("newer"), std::string::npos) << e.what();
    }

    // Truncated: refused (or, when the cut leaves the metadata readable, a tensor is missing),
    // never a crash.
    write_analysis_report(cut, "t", {"current_e4m3"}, {sample_tensor(0, {"current_e4m3"}), sample_tensor(1, {"current_e4m3"})});
    std::filesystem::resize_file(cut, std::filesystem::file_size(cut) / 2);
    EXPECT_THROW(read_analysis_report(cut), TraceError);
}

}  // namespace
}  // namespace fp8scope
