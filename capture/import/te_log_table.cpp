// /meta/te_log and its name tables, written into and read from a closed trace.
#include "te_log_table.h"

#include <algorithm>
#include <stdexcept>
#include <tuple>

#include "h5.h"
#include "record_fields.h"
#include "trace_schema.h"

namespace fp8scope::te_log {

template <fields::Of<RawRow> S, class V>
constexpr void visit_fields(S& r, V&& v) {
    v("run", r.run);
    v("step", r.step);
    v("linear", r.linear);
    v("tensor", r.tensor);
    v("stat", r.stat);
    v("value", r.value);
    v("file", r.file);
    v("line", r.line);
}

namespace {

constexpr std::size_t kStatChars = 256, kFileChars = 1024;

template <std::size_t N>
struct Names {
    using Objects = std::tuple<std::string>;
    template <class V, class S>
    static void columns(V&& v, S& name) { v("name", name, fields::MaxChars<N>{}); }
};
using RowTable = trace::schema::RecordTable<RawRow>;

// A table written once, chunked and deflated like the trace's own span data.
template <class Table, class RowAt>
void write_table(hid_t file, const std::string& path, const char* name, std::size_t rows, RowAt row_at) {
    const std::string what = path + ": " + name;
    const h5::Layout layout = trace::schema::layout<Table>();
    const hsize_t dims[1] = {rows};
    h5::Id space = h5::check(H5Screate_simple(1, dims, nullptr), what);
    h5::Id dcpl = h5::check(H5Pcreate(H5P_DATASET_CREATE), what);
    if (rows > 0) {
        const hsize_t chunk[1] = {std::min<hsize_t>(rows, 16384)};
        h5::check(H5Pset_chunk(dcpl, 1, chunk), what);
        h5::check(H5Pset_shuffle(dcpl), what);
        h5::check(H5Pset_deflate(dcpl, 1), what);
    }
    h5::Id type = layout.type();
    h5::Id ds = h5::check(H5Dcreate2(file, name, type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT), what + ": cannot create");
    // In slices, so a log of millions of values needs no copy of them all.
    constexpr std::size_t kSlice = std::size_t(1) << 16;
    std::vector<unsigned char> buf;
    for (std::size_t first = 0; first < rows; first += kSlice) {
        const std::size_t n = std::min(kSlice, rows - first);
        buf.assign(layout.size * n, 0);
        for (std::size_t i = 0; i < n; ++i) trace::schema::put_row<Table>(buf.data() + i * layout.size, row_at(first + i));
        const hsize_t start[1] = {first}, count[1] = {n};
        h5::Id memory = h5::check(H5Screate_simple(1, count, nullptr), what);
        h5::check(H5Sselect_hyperslab(space, H5S_SELECT_SET, start, nullptr, count, nullptr), what);
        h5::check(H5Dwrite(ds, type, memory, space, H5P_DEFAULT, buf.data()), what + ": cannot write");
    }
}

template <class Table, class T>
std::vector<T> read_table(hid_t file, const std::string& path, const char* name) {
    const std::string what = path + ": " + name;
    if (H5Lexists(file, name, H5P_DEFAULT) <= 0) return {};
    h5::Id ds = h5::check(H5Dopen2(file, name, H5P_DEFAULT), what);
    h5::Id space = h5::check(H5Dget_space(ds), what);
    if (H5Sget_simple_extent_ndims(space) != 1) throw h5::Error(what + ": not a table");
    hsize_t rows = 0;
    H5Sget_simple_extent_dims(space, &rows, nullptr);
    const h5::Layout layout = trace::schema::layout<Table>();
    // The bytes stored bound what is read (deflate shrinks at most ~1032:1): a damaged
    // extent is not a number to trust.
    if (rows > 0 && double(rows) * double(layout.size) > 1100.0 * double(H5Dget_storage_size(ds)))
        throw h5::Error(what + ": " + std::to_string(rows) + " rows but too few bytes stored");
    std::vector<unsigned char> buf(layout.size * rows);
    h5::Id type = layout.type();
    if (rows > 0) h5::check(H5Dread(ds, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf.data()), what + ": cannot read");
    std::vector<T> out(rows);
    for (std::size_t i = 0; i < out.size(); ++i) trace::schema::get_row<Table>(buf.data() + i * layout.size, out[i]);
    return out;
}

}  // namespace

void write_raw_tables(const std::string& path, const Log& log, const std::vector<std::int32_t>& linear_of_layer) {
    for (const auto& f : log.files)
        if (f.path.size() > kFileChars) throw std::runtime_error(f.path.substr(0, 60) + "...: path longer than the trace keeps");
    for (const auto& s : log.stats)
        if (s.size() > kStatChars) throw std::runtime_error("metric name longer than the trace keeps: " + s.substr(0, 60) + "...");
    h5::quiet_errors();
    h5::Id file = h5::check(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT), path + ": cannot open the trace");
    write_table<RowTable>(file, path, kValuesTable, log.values.size(), [&](std::size_t i) {
        const Value& v = log.values[i];
        return RawRow{v.file, v.iteration, v.layer < 0 ? -1 : linear_of_layer[v.layer], v.tensor, v.stat,
                      v.value, v.file, v.line};
    });
    write_table<Names<kStatChars>>(file, path, kStatsTable, log.stats.size(),
                                   [&](std::size_t i) -> const std::string& { return log.stats[i]; });
    write_table<Names<kFileChars>>(file, path, kFilesTable, log.files.size(),
                                   [&](std::size_t i) -> const std::string& { return log.files[i].path; });
}

RawTable read_raw_table(const std::string& path) {
    h5::quiet_errors();
    h5::Id file = h5::check(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), path + ": cannot open the trace");
    RawTable t;
    t.rows = read_table<RowTable, RawRow>(file, path, kValuesTable);
    t.stats = read_table<Names<kStatChars>, std::string>(file, path, kStatsTable);
    t.files = read_table<Names<kFileChars>, std::string>(file, path, kFilesTable);
    for (std::size_t i = 0; i < t.rows.size(); ++i) {
        const RawRow& r = t.rows[i];
        if (r.stat < 0 || std::size_t(r.stat) >= t.stats.size() || r.file < 0 || std::size_t(r.file) >= t.files.size())
            throw h5::Error(path + ": " + kValuesTable + " row " + std::to_string(i) + ": stat or file id out of range");
    }
    return t;
}

}  // namespace fp8scope::te_log
