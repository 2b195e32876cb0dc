// .safetensors reading: files built here from a hand-written JSON header and buffer,
// every supported dtype with exact values, ordering by data offset, and every error
// naming the file and, where there is one, the tensor.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/io_test_util.h"
#include "io/tensor_file.h"

using namespace fp8scope;
using namespace io_test;

namespace {

std::string st(const std::string& header, const std::string& buffer) {
    return uint_bytes(header.size(), 8) + header + buffer;
}

class Safetensors : public ::testing::Test {
protected:
    std::string dir = scratch_dir();
    std::string file(const std::string& bytes, const std::string& name = "m.safetensors") {
        return write_file(dir + "/" + name, bytes);
    }
    void expect_bad(const std::string& header, const std::string& buffer, const std::string& problem) {
        auto path = file(st(header, buffer));
        SCOPED_TRACE(header.substr(0, 100));
        expect_error([&] { read_safetensors(path); }, path, problem);
        expect_error([&] { list_safetensors(path); }, path, problem);  // the header alone fails alike
    }
};

}  // namespace

TEST_F(Safetensors, AllDtypesExactValuesInOffsetOrder) {
    // Buffer: bf16 [0,6) f32 [6,14) f16 [14,20) f64 [20,36); JSON lists them in another order.
    std::string buffer = f16_bytes({0x3F80, 0x4049, 0xFF80}) +  // bf16: 1, 3.140625, -Inf
                         f32_bytes({0.1f, -7.5f}) +
                         f16_bytes({0x3C00, 0x0001, 0xFBFF}) +  // f16: 1, 2^-24, -65504
                         f64_bytes({1e300, -0.25});
    std::string header = R"({"z_f32": {"dtype": "F32", "shape": [2], "data_offsets": [6, 14]},
        "__metadata__": {"format": "pt", "note": "x"},
        "y_f64": {"dtype": "F64", "shape": [1, 2], "data_offsets": [20, 36]},
        "a_f16": {"dtype": "F16", "shape": [3, 1], "data_offsets": [14, 20]},
        "m_bf16": {"dtype": "BF16", "shape": [3], "data_offsets": [0, 6]}})";
    auto got = read_safetensors(file(st(header, buffer)));
    ASSERT_EQ(got.size(), 4u);
    EXPECT_EQ(got[0].tensor.name, "m_bf16");
    EXPECT_EQ(got[0].source_dtype, "bfloat16");
    EXPECT_EQ(got[0].tensor.shape, (std::vector<std::int64_t>{3}));
    EXPECT_EQ(got[0].tensor.data, (std::vector<float>{1.0f, 3.140625f, -INFINITY}));
    EXPECT_EQ(got[1].tensor.name, "z_f32");
    EXPECT_EQ(got[1].source_dtype, "float32");
    EXPECT_EQ(got[1].tensor.data, (std::vector<float>{0.1f, -7.5f}));
    EXPECT_EQ(got[2].tensor.name, "a_f16");
    EXPECT_EQ(got[2].source_dtype, "float16");
    EXPECT_EQ(got[2].tensor.shape, (std::vector<std::int64_t>{3, 1}));
    EXPECT_EQ(got[2].tensor.data, (std::vector<float>{1.0f, 0x1p-24f, -65504.0f}));
    EXPECT_EQ(got[3].tensor.name, "y_f64");
    EXPECT_EQ(got[3].source_dtype, "float64");
    EXPECT_EQ(got[3].tensor.shape, (std::vector<std::int64_t>{1, 2}));
    EXPECT_EQ(got[3].tensor.data, (std::vector<float>{INFINITY, -0.25f}));
    // The header alone: the same names, dtypes and shapes in the same order.
    auto listed = list_safetensors(dir + "/m.safetensors");
    ASSERT_EQ(listed.size(), got.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
        EXPECT_EQ(listed[i].name, got[i].tensor.name);
        EXPECT_EQ(listed[i].source_dtype, got[i].source_dtype);
        EXPECT_EQ(listed[i].shape, got[i].tensor.shape);
    }
}

TEST_F(Safetensors, RanksZeroToFourAndEmptyTensors) {
    std::vector<float> values(2 * 3 * 2 * 2);
    for (std::size_t i = 0; i < values.size(); ++i) values[i] = float(i) - 5.0f;
    std::string buffer = f32_bytes({42.0f}) + f32_bytes(values) + f32_bytes({1, 2, 3, 4, 5, 6});
    std::string header = R"({"s": {"dtype": "F32", "shape": [], "data_offsets": [0, 4]},
        "r4": {"dtype": "F32", "shape": [2, 3, 2, 2], "data_offsets": [4, 100]},
        "r3": {"dtype": "F32", "shape": [1, 2, 3], "data_offsets": [100, 124]},
        "e": {"dtype": "BF16", "shape": [0, 4], "data_offsets": [124, 124]}})";
    auto got = read_safetensors(file(st(header, buffer)));
    ASSERT_EQ(got.size(), 4u);
    EXPECT_EQ(got[0].tensor.name, "s");
    EXPECT_TRUE(got[0].tensor.shape.empty());
    EXPECT_EQ(got[0].tensor.data, (std::vector<float>{42.0f}));
    EXPECT_EQ(got[1].tensor.shape, (std::vector<std::int64_t>{2, 3, 2, 2}));
    EXPECT_EQ(got[1].tensor.data, values);
    EXPECT_EQ(got[2].tensor.data, (std::vector<float>{1, 2, 3, 4, 5, 6}));
    EXPECT_EQ(got[3].tensor.name, "e");
    EXPECT_TRUE(got[3].tensor.data.empty());
    EXPECT_EQ(got[3].tensor.shape, (std::vector<std::int64_t>{0, 4}));
}

TEST_F(Safetensors, HeaderOnlyAndPaddedHeader) {
    // A file with no tensors is an error naming the file, never a silent success.
    auto none = file(st("{}", ""));
    expect_error([&] { read_safetensors(none); }, none, "no tensors");
    auto meta_only = file(st(R"({"__metadata__": {"a": "b"}})", ""));
    expect_error([&] { read_safetensors(meta_only); }, meta_only, "no tensors");
    std::string header = R"({"w": {"dtype": "F16", "shape": [1], "data_offsets": [0, 2]}})" + std::string(5, ' ');
    auto got = read_safetensors(file(st(header, f16_bytes({0xC000}))));
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].tensor.data, (std::vector<float>{-2.0f}));
}

TEST_F(Safetensors, FileAndHeaderSizeErrors) {
    std::string missing = dir + "/nope.safetensors";
    expect_error([&] { read_safetensors(missing); }, missing, "No such file or directory");
    auto short_file = file(std::string("\x05\x00\x00", 3));
    expect_error([&] { read_safetensors(short_file); }, short_file, "too short for a .safetensors header size (3 bytes)");
    auto past = file(uint_bytes(50, 8) + "{}");
    expect_error([&] { read_safetensors(past); }, past, "header too large: 50 bytes, but the file has only 2");
    auto huge = file(uint_bytes(100'000'001, 8) + "{}");
    expect_error([&] { read_safetensors(huge); }, huge, "header too large: 100000001 bytes (limit 100000000)");
    auto max = file(uint_bytes(0xFFFFFFFFFFFFFFFFull, 8) + "{}");
    expect_error([&] { read_safetensors(max); }, max, "header too large: 18446744073709551615 bytes");
}

TEST_F(Safetensors, InvalidJson) {
    expect_bad("{\"a\": ", "", "invalid JSON header");
    expect_bad("not json", "", "invalid JSON header");
    expect_bad("[1, 2]", "", "invalid header: the JSON is not an object");
    expect_bad("{\"a\": " + std::string(100000, '[') + std::string(100000, ']') + "}", "",
               "invalid JSON header: nested deeper than");
}

TEST_F(Safetensors, EntryFieldErrorsNameTheTensor) {
    std::string buf(16, '\0');
    expect_bad(R"({"w": 3})", buf, "tensor 'w': entry must be an object, got 3");
    expect_bad(R"({"w": {"shape": [1], "data_offsets": [0, 4]}})", buf, "tensor 'w': missing field 'dtype'");
    expect_bad(R"({"w": {"dtype": "F32", "data_offsets": [0, 4]}})", buf, "tensor 'w': missing field 'shape'");
    expect_bad(R"({"w": {"dtype": "F32", "shape": [1]}})", buf, "tensor 'w': missing field 'data_offsets'");
    expect_bad(R"({"w": {"dtype": 32, "shape": [1], "data_offsets": [0, 4]}})", buf,
               "tensor 'w': 'dtype' must be a string, got 32");
    expect_bad(R"({"w": {"dtype": "F32", "shape": "1", "data_offsets": [0, 4]}})", buf,
               "tensor 'w': 'shape' must be an array of non-negative integers, got \"1\"");
    expect_bad(R"({"w": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})", buf,
               "tensor 'w': 'shape' must be an array of non-negative integers, got [-1]");
    expect_bad(R"({"w": {"dtype": "F32", "shape": [1.5], "data_offsets": [0, 4]}})", buf,
               "tensor 'w': 'shape' must be an array of non-negative integers");
    expect_bad(R"({"w": {"dtype": "F32", "shape": [18446744073709551615], "data_offsets": [0, 4]}})", buf,
               "tensor 'w': 'shape' must be an array of non-negative integers");
    expect_bad(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0]}})", buf,
               "tensor 'w': 'data_offsets' must be [begin, end] of non-negative integers, got [0]");
    expect_bad(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, "4"]}})", buf,
               "tensor 'w': 'data_offsets' must be [begin, end]");
    expect_bad(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [-4, 0]}})", buf,
               "tensor 'w': 'data_offsets' must be [begin, end]");
    expect_bad(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": {"begin": 0}}})", buf,
               "tensor 'w': 'data_offsets' must be [begin, end]");
    expect_bad(R"({"__metadata__": {"step": 3}})", "", "'__metadata__' value of 'step' must be a string, got 3");
    expect_bad(R"({"__metadata__": [1]})", "", "'__metadata__' must be an object of strings");
}

TEST_F(Safetensors, DtypeErrorsNameTensorAndDtype) {
    std::string buf(16, '\0');
    expect_bad(R"({"w": {"dtype": "Q7", "shape": [1], "data_offsets": [0, 4]}})", buf, "tensor 'w': unknown dtype 'Q7'");
    expect_bad(R"({"w": {"dtype": "f32", "shape": [1], "data_offsets": [0, 4]}})", buf, "tensor 'w': unknown dtype 'f32'");
    for (std::string d : {"I32", "U8", "BOOL", "I64", "F8_E4M3", "F8_E5M2"}) {
        expect_bad(R"({"ids": {"dtype": ")" + d + R"(", "shape": [1], "data_offsets": [0, 4]}})", buf,
                   "tensor 'ids': dtype " + d + " not supported (F32, F16, BF16, F64)");
    }
    // One unsupported tensor fails the whole file.
    expect_bad(R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                   "tok": {"dtype": "I32", "shape": [2], "data_offsets": [8, 16]}})",
               buf, "tensor 'tok': dtype I32 not supported");
}

TEST_F(Safetensors, OffsetAndSizeErrors) {
    std::string buf(16, '\0');
    expect_bad(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [8, 4]}})", buf,
               "tensor 'w': data_offsets end 4 < begin 8");
    expect_bad(R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [12, 20]}})", buf,
               "tensor 'w': data_offsets [12, 20] past the end of the data buffer (16 bytes)");
    expect_bad(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [9223372036854775807, 9223372036854775807]}})",
               buf, "tensor 'w': data_offsets [9223372036854775807, 9223372036854775807] past the end");
    expect_bad(R"({"w": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}})", buf,
               "tensor 'w': shape [3] of F32 needs 12 bytes, data_offsets span 8");
    expect_bad(R"({"w": {"dtype": "BF16", "shape": [2, 2], "data_offsets": [0, 16]}})", buf,
               "tensor 'w': shape [2,2] of BF16 needs 8 bytes, data_offsets span 16");
    expect_bad(R"({"w": {"dtype": "F32", "shape": [4611686018427387904, 4], "data_offsets": [0, 16]}})", buf,
               "tensor 'w': shape [4611686018427387904,4] is too large");
    expect_bad(R"({"w": {"dtype": "F16", "shape": [4294967296, 4294967296, 0], "data_offsets": [0, 0]}})", buf,
               "tensor 'w': shape [4294967296,4294967296,0] is too large");
    expect_bad(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                   "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
               buf, "tensors 'a' [0, 8] and 'b' [4, 12] overlap");
    expect_bad(R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
                   "b": {"dtype": "F16", "shape": [2], "data_offsets": [8, 12]}})",
               buf, "tensors 'a' [0, 16] and 'b' [8, 12] overlap");
    // The header must also not eat the buffer: offsets are relative to the buffer start.
    auto path = file(st(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})", "\x01\x02"));
    expect_error([&] { read_safetensors(path); }, path, "past the end of the data buffer (2 bytes)");
}

TEST_F(Safetensors, AdjacentAndEmptyTensorsDoNotOverlap) {
    std::string header = R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
        "e": {"dtype": "F32", "shape": [0], "data_offsets": [2, 2]},
        "b": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})";
    auto got = read_safetensors(file(st(header, f32_bytes({1, 2}))));
    ASSERT_EQ(got.size(), 3u);
    EXPECT_EQ(got[0].tensor.name, "a");
    EXPECT_EQ(got[1].tensor.name, "e");
    EXPECT_EQ(got[2].tensor.data, (std::vector<float>{2}));
}

TEST_F(Safetensors, ReadTensorFileDispatch) {
    std::string bytes = st(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})", f32_bytes({3}));
    for (std::string name : {"m.safetensors", "m.SafeTensors", "m.SAFETENSORS"}) {
        auto got = read_tensor_file(file(bytes, name));
        ASSERT_EQ(got.size(), 1u) << name;
        EXPECT_EQ(got[0].tensor.name, "w");
        EXPECT_EQ(got[0].tensor.data, (std::vector<float>{3}));
    }
    auto path = file(bytes, "m.safetensor");
    expect_error([&] { read_tensor_file(path); }, path,
                 "unsupported file type (extension '.safetensor'); supported: .npy, .safetensors");
}

TEST_F(Safetensors, CorruptedFilesOnlyGiveTensorFileErrors) {
    std::string header = R"({"__metadata__": {"a": "b"}, "w": {"dtype": "BF16", "shape": [2, 2], "data_offsets": [0, 8]},
        "v": {"dtype": "F64", "shape": [1], "data_offsets": [8, 16]}})";
    std::string good = st(header, f16_bytes({1, 2, 3, 4}) + f64_bytes({1.0}));
    std::string path = dir + "/fuzz.safetensors";
    expect_only_tensor_file_errors(path, good, [&] { read_safetensors(path); });
}
