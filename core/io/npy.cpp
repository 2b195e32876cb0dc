// NumPy .npy files (format versions 1.0, 2.0, 3.0): the header is a Python dict
// literal parsed strictly, the data float16/32/64 in either byte order and either
// memory order, converted to a C-order float32 tensor. Bytes after the array are
// ignored, as NumPy ignores them.
#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>

#include "io/input_file.h"
#include "io/py_literal.h"
#include "io/raw_data.h"
#include "io/tensor_file.h"
#include "util/clip.h"

namespace fp8scope {

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr std::size_t kMagicLen = 6;

struct NpyDtype {
    RawType type;
    bool big_endian;
    const char* name;
};

NpyDtype parse_descr(const std::string& path, const PyLiteral& descr) {
    if (descr.kind == PyLiteral::Kind::List)
        throw TensorFileError(path, "dtype " + clip(descr.repr()) + " not supported (structured arrays)");
    if (descr.kind != PyLiteral::Kind::Str)
        throw TensorFileError(path, "malformed header: 'descr' must be a string, got " + clip(descr.repr()));
    const std::string& s = descr.str;
    if (s.size() >= 2 && s[1] == 'O') throw TensorFileError(path, "object arrays not supported (dtype '" + clip(s) + "')");
    if (s.size() == 3 && (s[0] == '<' || s[0] == '>' || s[0] == '=') && s[1] == 'f') {
        bool big = s[0] == '>' || (s[0] == '=' && std::endian::native == std::endian::big);
        if (s[2] == '2') return {RawType::F16, big, "float16"};
        if (s[2] == '4') return {RawType::F32, big, "float32"};
        if (s[2] == '8') return {RawType::F64, big, "float64"};
    }
    throw TensorFileError(path, "dtype '" + clip(s) + "' not supported (float16, float32, float64)");
}

std::vector<std::int64_t> parse_shape(const std::string& path, const PyLiteral& shape) {
    std::vector<std::int64_t> dims;
    bool ok = shape.kind == PyLiteral::Kind::Tuple;
    for (const PyLiteral& d : shape.items) {
        if (d.kind != PyLiteral::Kind::Int || d.integer < 0) ok = false;
        dims.push_back(d.integer);
    }
    if (!ok)
        throw TensorFileError(path, "malformed header: 'shape' must be a tuple of non-negative integers, got " +
                                        clip(shape.repr()));
    return dims;
}

std::uint64_t load_le(const unsigned char* p, int n) {
    std::uint64_t v = 0;
    for (int i = n - 1; i >= 0; --i) v = (v << 8) | p[i];
    return v;
}

// Fortran order (first index fastest) to C order (last index fastest).
std::vector<float> fortran_to_c(const std::vector<float>& in, const std::vector<std::int64_t>& shape) {
    std::size_t rank = shape.size();
    std::vector<float> out(in.size());
    std::vector<std::int64_t> stride(rank), idx(rank, 0);
    std::int64_t s = 1;
    for (std::size_t k = 0; k < rank; ++k) {
        stride[k] = s;
        s *= shape[k];
    }
    std::int64_t off = 0;
    for (float& o : out) {
        o = in[std::size_t(off)];
        for (std::size_t k = rank; k-- > 0;) {
            off += stride[k];
            if (++idx[k] < shape[k]) break;
            off -= stride[k] * shape[k];
            idx[k] = 0;
        }
    }
    return out;
}

std::string shape_repr(const std::vector<std::int64_t>& shape) {
    std::string s = "(";
    for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + (shape.size() == 1 ? ",)" : ")");
}

}  // namespace

LoadedTensor read_npy(const std::string& path) {
    InputFile file(path);
    unsigned char pre[12] = {};
    std::uint64_t size = file.size();
    file.read(0, pre, std::min<std::uint64_t>(size, sizeof pre));
    if (size < kMagicLen + 2 || std::memcmp(pre, kMagic, kMagicLen) != 0)
        throw TensorFileError(path, "not a .npy file (wrong magic)");
    int major = pre[6], minor = pre[7];
    if ((major != 1 && major != 2 && major != 3) || minor != 0)
        throw TensorFileError(path, "unsupported .npy version " + std::to_string(major) + "." + std::to_string(minor) +
                                        " (1.0, 2.0, 3.0)");
    int len_bytes = major == 1 ? 2 : 4;
    std::uint64_t header_start = 8 + std::uint64_t(len_bytes);
    if (size < header_start) throw TensorFileError(path, "truncated: file ends inside the header length");
    std::uint64_t header_len = load_le(pre + 8, len_bytes);
    if (header_len > size - header_start)
        throw TensorFileError(path, "header length " + std::to_string(header_len) + " runs past the end of the file (" +
                                        std::to_string(size) + " bytes)");
    std::string text(header_len, '\0');
    file.read(header_start, text.data(), header_len);

    PyLiteral header;
    try {
        header = parse_py_literal(text);
    } catch (const PyLiteralError& e) {
        throw TensorFileError(path, std::string("malformed header: ") + e.what());
    }
    if (header.kind != PyLiteral::Kind::Dict) throw TensorFileError(path, "malformed header: not a dictionary");
    const PyLiteral *descr = nullptr, *fortran = nullptr, *shape_lit = nullptr;
    for (const auto& [key, value] : header.entries) {
        if (key == "descr") descr = &value;
        else if (key == "fortran_order") fortran = &value;
        else if (key == "shape") shape_lit = &value;
        else throw TensorFileError(path, "malformed header: unexpected key '" + clip(key) + "'");
    }
    for (auto [ptr, name] : {std::pair{descr, "descr"}, {fortran, "fortran_order"}, {shape_lit, "shape"}})
        if (!ptr) throw TensorFileError(path, std::string("malformed header: missing key '") + name + "'");
    if (fortran->kind != PyLiteral::Kind::Bool)
        throw TensorFileError(path, "malformed header: 'fortran_order' must be True or False, got " + clip(fortran->repr()));
    NpyDtype dtype = parse_descr(path, *descr);
    std::vector<std::int64_t> shape = parse_shape(path, *shape_lit);

    std::uint64_t itemsize = raw_itemsize(dtype.type);
    auto nbytes = checked_nbytes(shape, itemsize);
    if (!nbytes) throw TensorFileError(path, "shape " + clip(shape_repr(shape)) + " is too large");
    std::uint64_t data_start = header_start + header_len;
    if (*nbytes > size - data_start)
        throw TensorFileError(path, "truncated: expected " + std::to_string(*nbytes) + " bytes of data, file has " +
                                        std::to_string(size - data_start));

    LoadedTensor out;
    out.source_dtype = dtype.name;
    out.tensor.name = std::filesystem::path(path).stem().string();
    out.tensor.shape = shape;
    out.tensor.data = read_as_float(file, data_start, *nbytes / itemsize, dtype.type, dtype.big_endian);
    if (fortran->boolean && shape.size() > 1) out.tensor.data = fortran_to_c(out.tensor.data, shape);
    return out;
}

namespace {

void write_npy_bytes(const std::string& path, const std::vector<std::int64_t>& shape, const void* data,
                     std::uint64_t itemsize, const char* descr) {
    auto nbytes = checked_nbytes(shape, itemsize);
    if (!nbytes) throw TensorFileError(path, "cannot write shape " + shape_repr(shape) + ": invalid or too large");
    std::string header = std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': " +
                         shape_repr(shape) + ", }";
    // Magic (6) + version (2) + length (2) + header + '\n' ends on a multiple of 64.
    std::size_t unpadded = 10 + header.size() + 1;
    header.append((64 - unpadded % 64) % 64, ' ');
    header += '\n';
    if (header.size() > 0xFFFF) throw TensorFileError(path, "cannot write: header too long for .npy version 1.0");

    std::string prefix(kMagic, kMagicLen);
    prefix += '\x01';
    prefix += '\x00';
    prefix += char(header.size() & 0xFF);
    prefix += char(header.size() >> 8);

    errno = 0;
    std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "wb"), std::fclose);
    if (!f) throw TensorFileError(path, std::string("cannot open for writing: ") + std::strerror(errno));
    bool ok = std::fwrite(prefix.data(), 1, prefix.size(), f.get()) == prefix.size() &&
              std::fwrite(header.data(), 1, header.size(), f.get()) == header.size();
    if (ok && *nbytes > 0) ok = std::fwrite(data, 1, *nbytes, f.get()) == *nbytes;
    if (!ok) throw TensorFileError(path, std::string("write failed: ") + std::strerror(errno));
    if (std::fclose(f.release()) != 0) throw TensorFileError(path, std::string("write failed: ") + std::strerror(errno));
}

}  // namespace

// Data is written as it lies in memory: the machines this runs on are little endian.
static_assert(std::endian::native == std::endian::little, "write_npy assumes a little-endian host");

void write_npy(const std::string& path, const std::vector<std::int64_t>& shape, const float* data) {
    write_npy_bytes(path, shape, data, 4, "<f4");
}

void write_npy(const std::string& path, const std::vector<std::int64_t>& shape, const std::uint8_t* data) {
    write_npy_bytes(path, shape, data, 1, "|u1");
}

}  // namespace fp8scope
