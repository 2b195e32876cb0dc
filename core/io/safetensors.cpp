// .safetensors files: an 8-byte little-endian header size, a JSON header describing
// each tensor (dtype, shape, data_offsets into the buffer after the header), then the
// buffer. Every entry is validated before any data is read, so a bad file yields no
// tensors at all.
#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>

#include "io/input_file.h"
#include "io/raw_data.h"
#include "io/tensor_file.h"
#include "util/json_input.h"

namespace fp8scope {

namespace {

using nlohmann::json;

constexpr std::uint64_t kMaxHeader = 100'000'000;  // the limit of the reference implementation

struct Entry {
    std::string name;
    RawType type;
    const char* source_dtype;
    std::vector<std::int64_t> shape;
    std::uint64_t begin, end;
};

struct DtypeInfo {
    const char* name;
    bool supported;
    RawType type;
    const char* source_dtype;
};

// Every dtype the format defines; only the floating ones the core analyses load.
constexpr DtypeInfo kDtypes[] = {
    {"F32", true, RawType::F32, "float32"},   {"F16", true, RawType::F16, "float16"},
    {"BF16", true, RawType::BF16, "bfloat16"}, {"F64", true, RawType::F64, "float64"},
    {"BOOL", false, {}, ""},  {"U8", false, {}, ""},     {"I8", false, {}, ""},       {"I16", false, {}, ""},
    {"U16", false, {}, ""},   {"I32", false, {}, ""},    {"U32", false, {}, ""},      {"I64", false, {}, ""},
    {"U64", false, {}, ""},   {"F8_E5M2", false, {}, ""}, {"F8_E4M3", false, {}, ""}, {"F8_E8M0", false, {}, ""},
    {"F4", false, {}, ""},    {"F6_E2M3", false, {}, ""}, {"F6_E3M2", false, {}, ""}, {"C64", false, {}, ""},
};

// Names come from the file: clipped, a 100 MB name must not become the message.
std::string quoted(const std::string& name) { return "tensor '" + clip(name) + "': "; }

// A JSON integer in [0, INT64_MAX], or nullopt.
std::optional<std::int64_t> non_negative(const json& v) {
    if (v.is_number_unsigned()) {
        auto u = v.get<std::uint64_t>();
        if (u <= std::uint64_t(INT64_MAX)) return std::int64_t(u);
        return std::nullopt;
    }
    if (v.is_number_integer() && v.get<std::int64_t>() >= 0) return v.get<std::int64_t>();
    return std::nullopt;
}

Entry parse_entry(const std::string& path, const std::string& name, const json& v, std::uint64_t buffer_size) {
    auto bad = [&](const std::string& what) { return TensorFileError(path, quoted(name) + what); };
    if (!v.is_object()) throw bad("entry must be an object, got " + show_json(v));
    for (const char* field : {"dtype", "shape", "data_offsets"})
        if (!v.contains(field)) throw bad(std::string("missing field '") + field + "'");

    const json& dt = v["dtype"];
    if (!dt.is_string()) throw bad("'dtype' must be a string, got " + show_json(dt));
    std::string dtype = dt.get<std::string>();
    const DtypeInfo* info = nullptr;
    for (const DtypeInfo& d : kDtypes)
        if (dtype == d.name) info = &d;
    if (!info) throw bad("unknown dtype '" + clip(dtype) + "'");
    if (!info->supported) throw bad("dtype " + dtype + " not supported (F32, F16, BF16, F64)");

    Entry e{name, info->type, info->source_dtype, {}, 0, 0};
    const json& sh = v["shape"];
    if (!sh.is_array()) throw bad("'shape' must be an array of non-negative integers, got " + show_json(sh));
    for (const json& d : sh) {
        auto n = non_negative(d);
        if (!n) throw bad("'shape' must be an array of non-negative integers, got " + show_json(sh));
        e.shape.push_back(*n);
    }

    const json& off = v["data_offsets"];
    std::optional<std::int64_t> b, en;
    if (off.is_array() && off.size() == 2) {
        b = non_negative(off[0]);
        en = non_negative(off[1]);
    }
    if (!b || !en) throw bad("'data_offsets' must be [begin, end] of non-negative integers, got " + show_json(off));
    e.begin = std::uint64_t(*b);
    e.end = std::uint64_t(*en);
    if (e.end < e.begin) throw bad("data_offsets end " + std::to_string(e.end) + " < begin " + std::to_string(e.begin));
    if (e.end > buffer_size)
        throw bad("data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) +
                  "] past the end of the data buffer (" + std::to_string(buffer_size) + " bytes)");

    auto nbytes = checked_nbytes(e.shape, raw_itemsize(e.type));
    if (!nbytes) throw bad("shape " + show_json(sh) + " is too large");
    if (*nbytes != e.end - e.begin)
        throw bad("shape " + show_json(sh) + " of " + dtype + " needs " + std::to_string(*nbytes) +
                  " bytes, data_offsets span " + std::to_string(e.end - e.begin));
    return e;
}

void check_metadata(const std::string& path, const json& meta) {
    if (!meta.is_object()) throw TensorFileError(path, "'__metadata__' must be an object of strings");
    for (const auto& [k, v] : meta.items())
        if (!v.is_string())
            throw TensorFileError(path, "'__metadata__' value of '" + clip(k) + "' must be a string, got " + show_json(v));
}

// The validated entries of a file's header, in order of data offset; `buffer_start`: where
// the data buffer begins.
std::vector<Entry> read_header(const std::string& path, InputFile& file, std::uint64_t& buffer_start) {
    std::uint64_t size = file.size();
    if (size < 8)
        throw TensorFileError(path, "too short for a .safetensors header size (" + std::to_string(size) + " bytes)");
    unsigned char len_bytes[8];
    file.read(0, len_bytes, 8);
    std::uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | len_bytes[i];
    if (n > kMaxHeader)
        throw TensorFileError(path, "header too large: " + std::to_string(n) + " bytes (limit " +
                                        std::to_string(kMaxHeader) + ")");
    if (n > size - 8)
        throw TensorFileError(path, "header too large: " + std::to_string(n) + " bytes, but the file has only " +
                                        std::to_string(size - 8) + " after the size field");
    std::string text(n, '\0');
    file.read(8, text.data(), n);

    // A depth limit keeps a header of nested brackets from costing gigabytes; a tensor
    // named twice would otherwise be read once, silently.
    constexpr int kMaxDepth = 16;
    json header;
    try {
        header = parse_json(text, kMaxDepth);
    } catch (const JsonInputError& e) {
        throw TensorFileError(path, std::string("invalid JSON header: ") + e.what());
    }
    if (!header.is_object()) throw TensorFileError(path, "invalid header: the JSON is not an object");

    buffer_start = 8 + n;
    const std::uint64_t buffer_size = size - buffer_start;
    std::vector<Entry> entries;
    for (const auto& [name, value] : header.items()) {
        if (name == "__metadata__") {
            check_metadata(path, value);
            continue;
        }
        entries.push_back(parse_entry(path, name, value, buffer_size));
    }
    if (entries.empty()) throw TensorFileError(path, "no tensors: the header lists none");
    std::stable_sort(entries.begin(), entries.end(),
                     [](const Entry& a, const Entry& b) { return a.begin < b.begin; });
    // Byte ranges must be disjoint; empty tensors occupy no bytes.
    const Entry* prev = nullptr;
    for (const Entry& e : entries) {
        if (e.begin == e.end) continue;
        if (prev && e.begin < prev->end)
            throw TensorFileError(path, "tensors '" + clip(prev->name) + "' [" + std::to_string(prev->begin) + ", " +
                                            std::to_string(prev->end) + "] and '" + clip(e.name) + "' [" +
                                            std::to_string(e.begin) + ", " + std::to_string(e.end) + "] overlap");
        prev = &e;
    }

    return entries;
}

}  // namespace

std::vector<TensorInfo> list_safetensors(const std::string& path) {
    InputFile file(path);
    std::uint64_t buffer_start = 0;
    std::vector<TensorInfo> out;
    for (const Entry& e : read_header(path, file, buffer_start)) out.push_back({e.name, e.source_dtype, e.shape});
    return out;
}

std::vector<LoadedTensor> read_safetensors(const std::string& path) {
    InputFile file(path);
    std::uint64_t buffer_start = 0;
    const std::vector<Entry> entries = read_header(path, file, buffer_start);
    std::vector<LoadedTensor> out;
    out.reserve(entries.size());
    for (const Entry& e : entries) {
        LoadedTensor t;
        t.source_dtype = e.source_dtype;
        t.tensor.name = e.name;
        t.tensor.shape = e.shape;
        std::uint64_t numel = (e.end - e.begin) / raw_itemsize(e.type);
        t.tensor.data = read_as_float(file, buffer_start + e.begin, numel, e.type, false);
        out.push_back(std::move(t));
    }
    return out;
}

}  // namespace fp8scope
