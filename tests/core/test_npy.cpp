// .npy reading and writing: files built byte by byte here, every dtype and byte order,
// both memory orders for ranks 0..4, every header and data error, and write_npy's
// exact header bytes.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/io_test_util.h"
#include "io/tensor_file.h"

using namespace fp8scope;
using namespace io_test;

namespace {

// Magic, version, header length (2 bytes for 1.0, 4 otherwise), header, data. The
// header is padded as NumPy pads it unless `pad` is false.
std::string npy(const std::string& header, const std::string& data, int major = 1, bool pad = true) {
    std::string h = header;
    int len_bytes = major == 1 ? 2 : 4;
    if (pad) {
        std::size_t total = 8 + len_bytes + h.size() + 1;
        h += std::string((64 - total % 64) % 64, ' ') + "\n";
    }
    return std::string("\x93NUMPY", 6) + char(major) + '\0' + uint_bytes(h.size(), len_bytes) + h + data;
}

std::string dict(const std::string& descr, bool fortran, const std::string& shape) {
    return "{'descr': '" + descr + "', 'fortran_order': " + (fortran ? "True" : "False") + ", 'shape': " + shape +
           ", }";
}

std::string shape_text(const std::vector<std::int64_t>& shape) {
    std::string s = "(";
    for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + (shape.size() == 1 ? ",)" : ")");
}

class Npy : public ::testing::Test {
protected:
    std::string dir = scratch_dir();
    std::string file(const std::string& name, const std::string& bytes) { return write_file(dir + "/" + name, bytes); }
};

}  // namespace

TEST_F(Npy, Float32LittleEndian) {
    std::vector<float> v{1.5f, -2.0f, 0.0f, 3.25e-3f, 1e30f, -0.0f};
    auto path = file("act.npy", npy(dict("<f4", false, "(2, 3)"), f32_bytes(v)));
    LoadedTensor t = read_npy(path);
    EXPECT_EQ(t.tensor.name, "act");
    EXPECT_EQ(t.source_dtype, "float32");
    EXPECT_EQ(t.tensor.shape, (std::vector<std::int64_t>{2, 3}));
    EXPECT_EQ(t.tensor.data, v);
    EXPECT_TRUE(std::signbit(t.tensor.data[5]));
}

TEST_F(Npy, Float32BigEndian) {
    std::vector<float> v{1.5f, -2.0f, 7.0f, INFINITY};
    auto path = file("w.npy", npy(dict(">f4", false, "(4,)"), f32_bytes(v, true)));
    LoadedTensor t = read_npy(path);
    EXPECT_EQ(t.tensor.data, v);
    EXPECT_EQ(t.tensor.shape, (std::vector<std::int64_t>{4}));
}

TEST_F(Npy, Float16BothByteOrdersExactValues) {
    // 1, -2, 65504 (max), 2^-24 (min subnormal), +Inf, 0x3555 = 0.333251953125, -0
    std::vector<std::uint16_t> bits{0x3C00, 0xC000, 0x7BFF, 0x0001, 0x7C00, 0x3555, 0x8000};
    std::vector<float> expect{1.0f, -2.0f, 65504.0f, 0x1p-24f, INFINITY, 0.333251953125f, -0.0f};
    for (bool big : {false, true}) {
        auto path = file("h.npy", npy(dict(big ? ">f2" : "<f2", false, "(7,)"), f16_bytes(bits, big)));
        LoadedTensor t = read_npy(path);
        EXPECT_EQ(t.source_dtype, "float16");
        EXPECT_EQ(t.tensor.data, expect) << (big ? "big" : "little");
        EXPECT_TRUE(std::signbit(t.tensor.data[6]));
    }
    auto path = file("nan.npy", npy(dict("<f2", false, "(1,)"), f16_bytes({0x7E00})));
    EXPECT_TRUE(std::isnan(read_npy(path).tensor.data[0]));
}

TEST_F(Npy, Float64ConvertsWithOverflowToInf) {
    // 0x1.ffffffp127 is the tie between float32 max and 2^128: even goes to Inf.
    std::vector<double> v{0.1, -1e300, 1e300, 3.4028235e38, -1e-50, 2.5, 0x1.ffffffp127, -0x1.fffffefffffffp127};
    constexpr float kMax = std::numeric_limits<float>::max();
    std::vector<float> expect{0.1f, -INFINITY, INFINITY, kMax, -0.0f, 2.5f, INFINITY, -kMax};
    for (bool big : {false, true}) {
        auto path = file("d.npy", npy(dict(big ? ">f8" : "<f8", false, "(4, 2)"), f64_bytes(v, big)));
        LoadedTensor t = read_npy(path);
        EXPECT_EQ(t.source_dtype, "float64");
        EXPECT_EQ(t.tensor.data, expect);
        EXPECT_TRUE(std::signbit(t.tensor.data[4]));
    }
}

TEST_F(Npy, Float64LargerThanOneReadChunk) {
    std::vector<double> v(100003);
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = double(i) * 0.5;
    auto path = file("big.npy", npy(dict("<f8", false, "(100003,)"), f64_bytes(v)));
    LoadedTensor t = read_npy(path);
    ASSERT_EQ(t.tensor.data.size(), v.size());
    for (std::size_t i = 0; i < v.size(); ++i) ASSERT_EQ(t.tensor.data[i], float(i) * 0.5f) << i;
}

// Values are each element's C-order linear index; the Fortran file stores element
// (i0, .., ik) at position i0 + d0*(i1 + d1*(...)), built here by decomposing the position.
TEST_F(Npy, BothMemoryOrdersRanksOneToFour) {
    std::vector<std::vector<std::int64_t>> shapes{{5}, {2, 3}, {3, 1, 4}, {2, 3, 4, 5}, {4, 7}};
    for (const auto& shape : shapes) {
        std::int64_t n = 1;
        for (auto d : shape) n *= d;
        std::vector<float> c_order(n), f_order(n);
        for (std::int64_t i = 0; i < n; ++i) c_order[i] = float(i);
        for (std::int64_t p = 0; p < n; ++p) {
            std::int64_t rest = p, c_index = 0, c_stride = 1;
            std::vector<std::int64_t> idx(shape.size());
            for (std::size_t k = 0; k < shape.size(); ++k) {
                idx[k] = rest % shape[k];
                rest /= shape[k];
            }
            for (std::size_t k = shape.size(); k-- > 0;) {
                c_index += idx[k] * c_stride;
                c_stride *= shape[k];
            }
            f_order[p] = float(c_index);
        }
        for (bool fortran : {false, true}) {
            auto path = file("t.npy", npy(dict("<f4", fortran, shape_text(shape)), f32_bytes(fortran ? f_order : c_order)));
            LoadedTensor t = read_npy(path);
            EXPECT_EQ(t.tensor.shape, shape);
            EXPECT_EQ(t.tensor.data, c_order) << shape_text(shape) << (fortran ? " fortran" : " C");
        }
    }
}

TEST_F(Npy, FortranTransposeHandChecked) {
    // 2x3 matrix [[1,2,3],[4,5,6]] stored column by column.
    auto path = file("m.npy", npy(dict("<f4", true, "(2, 3)"), f32_bytes({1, 4, 2, 5, 3, 6})));
    EXPECT_EQ(read_npy(path).tensor.data, (std::vector<float>{1, 2, 3, 4, 5, 6}));
}

TEST_F(Npy, ZeroDimensionalLoadsWithEmptyShape) {
    auto path = file("s.npy", npy(dict("<f4", false, "()"), f32_bytes({42.0f})));
    LoadedTensor t = read_npy(path);
    EXPECT_TRUE(t.tensor.shape.empty());
    EXPECT_EQ(t.tensor.data, (std::vector<float>{42.0f}));
}

TEST_F(Npy, ZeroSizeDimensions) {
    for (std::string shape : {"(0,)", "(0, 3)", "(3, 0)", "(2, 0, 4)"}) {
        for (bool fortran : {false, true}) {
            auto path = file("z.npy", npy(dict("<f2", fortran, shape), ""));
            LoadedTensor t = read_npy(path);
            EXPECT_TRUE(t.tensor.data.empty()) << shape;
            EXPECT_EQ(t.tensor.numel(), 0) << shape;
        }
    }
}

TEST_F(Npy, Versions2And3HaveFourByteHeaderLength) {
    for (int major : {2, 3}) {
        auto path = file("v.npy", npy(dict("<f4", false, "(2,)"), f32_bytes({1, 2}), major));
        EXPECT_EQ(read_npy(path).tensor.data, (std::vector<float>{1, 2})) << major;
    }
}

TEST_F(Npy, HeaderSpellingsPythonAccepts) {
    const char* headers[] = {
        "{'shape': (2,), 'fortran_order': False, 'descr': '<f4'}",     // any key order, no trailing comma
        "{\"descr\": \"<f4\", \"fortran_order\": False, \"shape\": (2, ), }",  // double quotes
        "{ 'descr' : '<f4' ,\n 'fortran_order':False,'shape':( 2 , ) , }",   // whitespace
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2,)}",
    };
    for (const char* h : headers) {
        auto path = file("x.npy", npy(h, f32_bytes({3, 4})));
        EXPECT_EQ(read_npy(path).tensor.data, (std::vector<float>{3, 4})) << h;
    }
    // Unpadded header without a trailing newline.
    auto path = file("u.npy", npy(dict("<f4", false, "(1,)"), f32_bytes({5}), 1, false));
    EXPECT_EQ(read_npy(path).tensor.data, (std::vector<float>{5}));
}

TEST_F(Npy, FileErrors) {
    std::string missing = dir + "/missing.npy";
    expect_error([&] { read_npy(missing); }, missing, "No such file or directory");
    expect_error([&] { read_npy(dir); }, dir, "not a regular file");
    auto magic = file("magic.npy", "PK\x03\x04 not numpy at all");
    expect_error([&] { read_npy(magic); }, magic, "not a .npy file (wrong magic)");
    auto tiny = file("tiny.npy", "\x93NU");
    expect_error([&] { read_npy(tiny); }, tiny, "wrong magic");
    auto empty = file("empty.npy", "");
    expect_error([&] { read_npy(empty); }, empty, "wrong magic");
}

TEST_F(Npy, UnsupportedVersions) {
    std::string good = npy(dict("<f4", false, "(1,)"), f32_bytes({1}));
    for (auto [major, minor, text] : {std::tuple{4, 0, "4.0"}, {1, 1, "1.1"}, {0, 0, "0.0"}}) {
        std::string bytes = good;
        bytes[6] = char(major);
        bytes[7] = char(minor);
        auto path = file("ver.npy", bytes);
        expect_error([&] { read_npy(path); }, path, std::string("unsupported .npy version ") + text);
    }
    auto cut = file("cut.npy", std::string("\x93NUMPY\x02\x00\x10", 9));
    expect_error([&] { read_npy(cut); }, cut, "file ends inside the header length");
}

TEST_F(Npy, HeaderLengthPastTheFile) {
    std::string bytes = std::string("\x93NUMPY\x01\x00", 8) + uint_bytes(1000, 2) + "{'descr': '<f4'}";
    auto path = file("hl.npy", bytes);
    expect_error([&] { read_npy(path); }, path, "header length 1000 runs past the end of the file (26 bytes)");
    auto path2 = file("hl2.npy", std::string("\x93NUMPY\x02\x00", 8) + uint_bytes(0xFFFFFFFFu, 4));
    expect_error([&] { read_npy(path2); }, path2, "header length 4294967295 runs past the end of the file");
}

TEST_F(Npy, MalformedHeaderNamesTheProblem) {
    struct Case {
        std::string header, problem;
    };
    std::vector<Case> cases{
        {"[1, 2]", "malformed header: not a dictionary"},
        {"{'descr': '<f4', 'fortran_order': False}", "malformed header: missing key 'shape'"},
        {"{'fortran_order': False, 'shape': (1,)}", "malformed header: missing key 'descr'"},
        {"{'descr': '<f4', 'shape': (1,)}", "malformed header: missing key 'fortran_order'"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'extra': 1}", "unexpected key 'extra'"},
        {"{'descr': '<f4', 'fortran_order': 0, 'shape': (1,)}", "'fortran_order' must be True or False, got 0"},
        {"{'descr': '<f4', 'fortran_order': 'no', 'shape': (1,)}", "'fortran_order' must be True or False, got 'no'"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': [1]}", "'shape' must be a tuple of non-negative integers, got [1]"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1)}", "'shape' must be a tuple of non-negative integers, got 1"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (-1,)}", "'shape' must be a tuple of non-negative integers, got (-1,)"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': ('1',)}", "'shape' must be a tuple"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1.5,)}", "malformed header: not an integer"},
        {"{'descr': 4, 'fortran_order': False, 'shape': (1,)}", "'descr' must be a string, got 4"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,), } junk", "malformed header: unexpected text after the literal"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,)", "malformed header: expected ','"},
        {"{'descr': '<f4, 'fortran_order': False, 'shape': (1,)}", "malformed header"},
        {"{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (1,)}", "malformed header: duplicate key 'descr'"},
        {"{'descr': '<f4', 'fortran_order': false, 'shape': (1,)}", "malformed header: unknown name 'false'"},
        {"{1: '<f4'}", "malformed header: dictionary key is not a string"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,,)}", "malformed header"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}", "malformed header: integer too large"},
        {"", "malformed header: unexpected end"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': " + std::string(100000, '(') + "1" +
             std::string(100000, ')') + "}",
         "malformed header: nesting too deep"},
    };
    for (const Case& c : cases) {
        auto path = file("bad.npy", npy(c.header, f32_bytes({1})));
        SCOPED_TRACE(c.header.substr(0, 80));
        expect_error([&] { read_npy(path); }, path, c.problem);
    }
}

TEST_F(Npy, UnsupportedDtypesAreNamed) {
    for (std::string d : {"<i4", "|u1", "<c8", "|b1", "<f16", "|f4", "<U3", "float32"}) {
        auto path = file("dt.npy", npy(dict(d, false, "(1,)"), std::string(16, '\0')));
        expect_error([&] { read_npy(path); }, path, "dtype '" + d + "' not supported (float16, float32, float64)");
    }
    auto obj = file("obj.npy", npy(dict("|O", false, "(1,)"), std::string(8, '\0')));
    expect_error([&] { read_npy(obj); }, obj, "object arrays not supported (dtype '|O')");
    auto rec = file("rec.npy", npy("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,)}", f32_bytes({1})));
    expect_error([&] { read_npy(rec); }, rec, "dtype [('a', '<f4')] not supported (structured arrays)");
}

TEST_F(Npy, TruncatedData) {
    auto path = file("tr.npy", npy(dict("<f4", false, "(2, 3)"), f32_bytes({1, 2, 3, 4, 5})));
    expect_error([&] { read_npy(path); }, path, "truncated: expected 24 bytes of data, file has 20");
    auto path2 = file("tr2.npy", npy(dict("<f8", false, "(1000000000000,)"), f64_bytes({1})));
    expect_error([&] { read_npy(path2); }, path2, "truncated: expected 8000000000000 bytes of data, file has 8");
    auto path3 = file("tr3.npy", npy(dict("<f4", false, "()"), ""));
    expect_error([&] { read_npy(path3); }, path3, "truncated: expected 4 bytes of data, file has 0");
}

TEST_F(Npy, ShapeOverflow) {
    for (std::string shape : {"(4611686018427387904, 4)", "(3037000500, 3037000500)", "(9223372036854775807,)",
                              "(4294967296, 4294967296, 0)"}) {
        auto path = file("ov.npy", npy(dict("<f4", false, shape), f32_bytes({1})));
        expect_error([&] { read_npy(path); }, path, "shape " + shape + " is too large");
    }
}

TEST_F(Npy, WriteFloat32ExactHeaderAndReadBack) {
    std::vector<float> v{1, -2, 3.5f, 0, NAN, -INFINITY};
    std::string path = dir + "/out.npy";
    write_npy(path, {2, 3}, v.data());
    std::string bytes = read_file(path);
    std::string expect_header = std::string("\x93NUMPY\x01\x00\x76\x00", 10) +
                                "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }" +
                                std::string(58, ' ') + "\n";
    ASSERT_EQ(bytes.size(), 128u + 24u);
    EXPECT_EQ(bytes.substr(0, 128), expect_header);
    EXPECT_EQ(bytes.substr(128), f32_bytes(v));
    LoadedTensor t = read_npy(path);
    EXPECT_EQ(t.tensor.name, "out");
    EXPECT_EQ(t.tensor.shape, (std::vector<std::int64_t>{2, 3}));
    EXPECT_EQ(f32_bytes(t.tensor.data), f32_bytes(v));  // bit-exact, NaN included
}

TEST_F(Npy, WriteUint8ExactHeader) {
    std::vector<std::uint8_t> v{0, 1, 0x7E, 0x80, 0xFF};
    std::string path = dir + "/codes.npy";
    write_npy(path, {5}, v.data());
    std::string expect = std::string("\x93NUMPY\x01\x00\x76\x00", 10) +
                         "{'descr': '|u1', 'fortran_order': False, 'shape': (5,), }" + std::string(60, ' ') + "\n" +
                         std::string("\x00\x01\x7E\x80\xFF", 5);
    EXPECT_EQ(read_file(path), expect);
    // The reader only loads floats, and says so.
    expect_error([&] { read_npy(path); }, path, "dtype '|u1' not supported");
}

TEST_F(Npy, WriteZeroDimensionalAndEmpty) {
    float x = 7.0f;
    std::string path = dir + "/scalar.npy";
    write_npy(path, {}, &x);
    std::string expect = std::string("\x93NUMPY\x01\x00\x76\x00", 10) +
                         "{'descr': '<f4', 'fortran_order': False, 'shape': (), }" + std::string(62, ' ') + "\n" +
                         f32_bytes({7.0f});
    EXPECT_EQ(read_file(path), expect);
    EXPECT_EQ(read_npy(path).tensor.data, (std::vector<float>{7.0f}));

    std::string empty = dir + "/empty.npy";
    write_npy(empty, {0, 4}, static_cast<const float*>(nullptr));
    EXPECT_EQ(read_file(empty).size(), 128u);
    EXPECT_EQ(read_npy(empty).tensor.shape, (std::vector<std::int64_t>{0, 4}));
}

TEST_F(Npy, WriteErrors) {
    float x = 0;
    std::string path = dir + "/no/such/dir/x.npy";
    expect_error([&] { write_npy(path, {1}, &x); }, path, "cannot open for writing: No such file or directory");
    std::string neg = dir + "/neg.npy";
    expect_error([&] { write_npy(neg, {-1}, &x); }, neg, "cannot write shape (-1,): invalid or too large");
}

TEST_F(Npy, ReadTensorFileDispatchesByExtension) {
    std::string bytes = npy(dict("<f4", false, "(1,)"), f32_bytes({9}));
    for (std::string name : {"a.npy", "b.NPY", "c.Npy"}) {
        auto got = read_tensor_file(file(name, bytes));
        ASSERT_EQ(got.size(), 1u) << name;
        EXPECT_EQ(got[0].tensor.data, (std::vector<float>{9})) << name;
        EXPECT_EQ(got[0].tensor.name, name.substr(0, 1));
    }
    for (std::string name : {"a.txt", "a.npz", "noext"}) {
        auto path = file(name, bytes);
        expect_error([&] { read_tensor_file(path); }, path, "unsupported file type");
        expect_error([&] { read_tensor_file(path); }, path, "supported: .npy, .safetensors");
    }
    auto path = file("a.pt", bytes);
    expect_error([&] { read_tensor_file(path); }, path, "unsupported file type (extension '.pt')");
}

TEST_F(Npy, CorruptedFilesOnlyGiveTensorFileErrors) {
    std::string good = npy(dict(">f2", true, "(3, 2, 2)"), f16_bytes(std::vector<std::uint16_t>(12, 0x3C00), true));
    std::string path = dir + "/fuzz.npy";
    expect_only_tensor_file_errors(path, good, [&] { read_npy(path); });
}
