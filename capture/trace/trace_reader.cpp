// The trace reader. Opens with SWMR read access (plain read-only for files that are not
// SWMR-capable, so foreign files get a clear answer), checks the format attributes, the
// type and shape of every dataset, and indexes the tables by (run, step) once, then
// incrementally on refresh(). Every id, offset and count read from the file is checked
// before it is used: a damaged file raises TraceError, never reads out of bounds.
#include "trace_reader.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <stdexcept>
#include <tuple>

#include "h5.h"
#include "trace_schema.h"

namespace fp8scope::trace {
namespace s = schema;

namespace {

struct Dataset {
    const char* path = nullptr;
    h5::Id dset;
    h5::Id memtype;
    hsize_t rows = 0;
    hsize_t cols = 0;        // 0: 1-D
    std::size_t row_bytes = 0;  // in the file
    hsize_t chunk_bytes = 0;    // HDF5 allocates a whole chunk to read any row of it
    h5::Layout layout;          // a compound table's columns (trace_schema.h)
    std::vector<std::size_t> absent;  // columns an older file lacks: they read as defaults
};

// A key of the (run, step) indexes.
using RunStep = std::pair<std::int32_t, std::int64_t>;

constexpr unsigned kReadAttempts = 10;
constexpr std::size_t kConversionBuffer = 64u << 10;
constexpr hsize_t kIndexChunk = 1u << 16;  // rows per read while indexing

bool in_bounds(std::uint64_t offset, std::uint64_t count, hsize_t rows) {
    return count <= rows && offset <= rows - count;
}

}  // namespace

struct TraceReader::Impl {
    std::string path;
    TraceMeta meta;
    h5::Id file;
    h5::Id dxpl;  // small conversion buffers: most reads are a few rows

    Dataset runs, linears, recipes, training_recipes, op_names;
    Dataset steps, events, scaling_index, scaling_amax, scaling_scale;
    Dataset operands, errors, histogram, channel_absmax, top, amax_history;
    Dataset blockmaps, block_absmax, block_scale_inv, block_sqnr;
    Dataset ops;
    Dataset ranks;  // absent (no dataset) in files without rank records
    hsize_t slots = 0;
    h5::Layout key_layout;  // the key columns of operand and block-map rows
    h5::Id key_type;

    // Flat data of many operand rows read in one go (operands() of a step): decoding a row
    // copies its spans from here instead of reading each one, which costs HDF5 more per
    // call than per byte. Set for the span of one call (a reader is used by one thread).
    struct Block {
        const Dataset* d = nullptr;
        hsize_t start = 0, count = 0;
        std::size_t elem = 0;
        std::vector<unsigned char> bytes;
    };
    mutable const std::vector<Block>* blocks = nullptr;

    // What has been indexed so far.
    std::vector<StepRecord> step_records;
    std::vector<EventRecord> event_records;
    std::vector<RankStepRecord> rank_records;
    std::map<RunStep, std::vector<hsize_t>> operand_rows, blockmap_rows;
    std::map<RunStep, hsize_t> scaling_rows;
    std::map<std::pair<std::int32_t, int>, std::vector<std::pair<std::int64_t, hsize_t>>> series_rows;  // (run, slot), step order
    // Per run, in step order: runs of consecutive op rows of one step (a step's ops and
    // kernels are written together, so a step is usually one entry, not one per row).
    struct OpRows {
        std::int64_t step;
        hsize_t first, count;
    };
    std::vector<std::vector<OpRows>> op_rows;
    hsize_t indexed_steps = 0, indexed_events = 0, indexed_scaling = 0, indexed_operands = 0,
            indexed_blockmaps = 0, indexed_ops = 0, indexed_ranks = 0;

    TraceError fail(const std::string& problem) const { return TraceError(path, problem); }

    // ---- opening ----
    void open() {
        h5::quiet_errors();
        std::error_code ec;
        if (!std::filesystem::exists(path, ec)) throw fail("no such file");
        if (!std::filesystem::is_regular_file(path, ec)) throw fail("not a regular file");
        if (H5Fis_hdf5(path.c_str()) <= 0) throw fail("not an HDF5 file (no HDF5 signature)");
        // SWMR reading retries metadata whose checksum fails (the writer may be mid-write),
        // with a growing sleep; a few attempts keep a damaged file from stalling the caller.
        dxpl = h5::check(H5Pcreate(H5P_DATASET_XFER), "dxpl");
        h5::check(H5Pset_buffer(dxpl, kConversionBuffer, nullptr, nullptr), "conversion buffer");
        h5::Id fapl = h5::check(H5Pcreate(H5P_FILE_ACCESS), "fapl");
        h5::check(H5Pset_metadata_read_attempts(fapl, kReadAttempts), "read attempts");
        file = h5::Id(H5Fopen(path.c_str(), H5F_ACC_RDONLY | H5F_ACC_SWMR_READ, fapl));
        if (!file.valid()) file = h5::Id(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
        if (!file.valid()) throw fail("damaged or truncated HDF5 file: the library cannot open it");

        std::string format;
        if (!read_string_attr("format", format))
            throw fail("not an fp8scope trace: the root has no 'format' attribute");
        if (format != s::kFormatName)
            throw fail("not an fp8scope trace: format attribute is '" + format + "', expected '" +
                       s::kFormatName + "'");
        std::int64_t version = 0;
        if (!read_int_attr("format_version", version)) throw fail("missing or malformed 'format_version' attribute");
        if (version < 1) throw fail("invalid format_version " + std::to_string(version));
        if (version > kFormatVersion)
            throw fail("format_version " + std::to_string(version) + " is newer than this reader (reads up to " +
                       std::to_string(kFormatVersion) + "); update fp8scope to open it");
        meta.format_version = static_cast<int>(version);
        read_meta_attrs();

        runs = open_table<s::RunTable>(s::kRuns);
        linears = open_table<s::LinearTable>(s::kLinears);
        recipes = open_table<s::NamesTable>(s::kRecipes);
        training_recipes = open_table<s::NamesTable>(s::kTrainingRecipes);
        op_names = open_table<s::NamesTable>(s::kOps);
        meta.runs = read_records<s::RunTable>(runs, 0, runs.rows);
        meta.linears = read_records<s::LinearTable>(linears, 0, linears.rows);
        meta.recipes = read_records<s::NamesTable>(recipes, 0, recipes.rows);
        meta.training_recipes = read_records<s::NamesTable>(training_recipes, 0, training_recipes.rows);
        slots = meta.linears.size() * kOperandsPerLinear;

        steps = open_table<s::StepTable>(s::kSteps);
        events = open_table<s::EventTable>(s::kEvents);
        scaling_index = open_table<s::ScalingIndexTable>(s::kScalingIndex);
        scaling_amax = open_ds(s::kScalingAmax, h5::Id(H5Tcopy(H5T_NATIVE_FLOAT)), slots ? slots : 1);
        scaling_scale = open_ds(s::kScalingScale, h5::Id(H5Tcopy(H5T_NATIVE_FLOAT)), slots ? slots : 1);
        operands = open_table<s::OperandTable>(s::kOperands);
        errors = open_table<s::ErrorTable>(s::kOperandErrors);
        histogram = open_ds(s::kOperandHistogram, h5::Id(H5Tcopy(H5T_NATIVE_INT64)));
        channel_absmax = open_ds(s::kOperandChannelAbsmax, h5::Id(H5Tcopy(H5T_NATIVE_FLOAT)));
        top = open_table<s::TopTable>(s::kOperandTop);
        amax_history = open_ds(s::kOperandAmaxHistory, h5::Id(H5Tcopy(H5T_NATIVE_FLOAT)));
        blockmaps = open_table<s::BlockMapTable>(s::kBlockMaps);
        block_absmax = open_ds(s::kBlockAbsmax, h5::Id(H5Tcopy(H5T_NATIVE_FLOAT)));
        block_scale_inv = open_ds(s::kBlockScaleInv, h5::Id(H5Tcopy(H5T_NATIVE_FLOAT)));
        block_sqnr = open_ds(s::kBlockSqnr, h5::Id(H5Tcopy(H5T_NATIVE_FLOAT)));
        ops = open_table<s::OpTable>(s::kOpTimes);
        // Single-process runs and files before format 3 have no rank records.
        if (H5Lexists(file, s::kRanks + 1, H5P_DEFAULT) > 0) ranks = open_table<s::RankTable>(s::kRanks);
        key_layout = s::layout<s::KeyTable>();
        key_type = key_layout.type();
        // Indexing reads the key columns alone; an operand or block-map row starts with
        // them (trace_schema.h), so the same bytes decode as a key.
        for (const Dataset* d : {&operands, &blockmaps})
            for (std::size_t i = 0; i < key_layout.columns.size(); ++i)
                if (d->layout.columns.at(i).name != key_layout.columns[i].name ||
                    d->layout.columns[i].offset != key_layout.columns[i].offset)
                    throw std::logic_error(std::string(d->path) + ": the key columns do not lead the row");
        op_rows.resize(meta.runs.size());
        index();
    }

    bool read_string_attr(const char* name, std::string& out) {
        if (H5Aexists(file, name) <= 0) return false;
        h5::Id attr(H5Aopen(file, name, H5P_DEFAULT));
        if (!attr.valid()) return false;
        h5::Id type(H5Aget_type(attr));
        h5::Id space(H5Aget_space(attr));
        if (!type.valid() || !space.valid() || H5Tget_class(type) != H5T_STRING ||
            H5Sget_simple_extent_npoints(space) != 1)
            return false;
        if (H5Tis_variable_str(type) > 0) {
            h5::Id mem(H5Tcopy(type));  // same character set: HDF5 does not convert between them
            char* p = nullptr;
            if (H5Aread(attr, mem, &p) < 0 || p == nullptr) return false;
            out = p;
            H5free_memory(p);
            return true;
        }
        std::size_t n = H5Tget_size(type);
        std::error_code ec;
        if (n == 0 || n > (64u << 20) || n > std::filesystem::file_size(path, ec) || ec) return false;
        std::string buf(n, '\0');
        h5::Id mem(H5Tcopy(type));
        if (H5Aread(attr, mem, buf.data()) < 0) return false;
        out = buf.substr(0, std::strlen(buf.c_str()));
        return true;
    }

    // The root attributes, from TraceMeta's field list as the writer wrote them (its vectors
    // are the /meta tables). One that a file lacks keeps its field's default: an older
    // file is rank 0 of 1.
    void read_meta_attrs() {
        visit_fields(meta, [&](std::string_view name, auto& value, const auto&... facts) {
            using T = std::remove_cvref_t<decltype(value)>;
            const std::string attr(fields::flat_name(name, facts...));
            if (attr == "format_version") return;  // read and checked first
            if constexpr (std::is_same_v<T, std::string>) {
                read_string_attr(attr.c_str(), value);
            } else if constexpr (std::is_integral_v<T>) {
                std::int64_t v = 0;
                if (!read_int_attr(attr.c_str(), v)) return;
                if (v < std::numeric_limits<T>::min() || v > std::numeric_limits<T>::max())
                    throw fail("attribute '" + attr + "' = " + std::to_string(v) + " is out of range");
                value = static_cast<T>(v);
            }
        });
        if (auto why = check_meta(meta); !why.empty()) throw fail("damaged root attributes: " + why);
    }

    bool read_int_attr(const char* name, std::int64_t& out) {
        if (H5Aexists(file, name) <= 0) return false;
        h5::Id attr(H5Aopen(file, name, H5P_DEFAULT));
        if (!attr.valid()) return false;
        h5::Id type(H5Aget_type(attr));
        h5::Id space(H5Aget_space(attr));
        if (!type.valid() || !space.valid() || H5Tget_class(type) != H5T_INTEGER ||
            H5Sget_simple_extent_npoints(space) != 1)
            return false;
        return H5Aread(attr, H5T_NATIVE_INT64, &out) >= 0;
    }

    // Opens a table and checks that its type holds every column of its layout (same type
    // class). A column added after the file's format version is allowed to be missing:
    // it reads as the default of its field.
    template <class Table>
    Dataset open_table(const char* p) {
        h5::Layout layout = s::layout<Table>();
        Dataset d = open_ds(p, layout.type(), 0, &layout);
        d.layout = std::move(layout);
        return d;
    }

    // Opens a dataset and checks that its type holds every field the reader needs (same
    // type class) and that its shape is (rows) or (rows, cols).
    Dataset open_ds(const char* p, h5::Id memtype, hsize_t cols = 0, const h5::Layout* layout = nullptr) {
        Dataset d;
        d.path = p;
        if (H5Lexists(file, p + 1, H5P_DEFAULT) <= 0 && !group_and_link_exist(p))
            throw fail(std::string("missing dataset ") + p);
        d.dset = h5::Id(H5Dopen2(file, p, H5P_DEFAULT));
        if (!d.dset.valid()) throw fail(std::string("cannot open dataset ") + p + " (damaged?)");
        h5::Id ftype(H5Dget_type(d.dset));
        if (!ftype.valid()) throw fail(std::string("unreadable type of ") + p);
        H5T_class_t mc = H5Tget_class(memtype), fc = H5Tget_class(ftype);
        if (mc != fc) throw fail(std::string(p) + " has the wrong element type class");
        if (mc == H5T_COMPOUND) {
            int n = H5Tget_nmembers(memtype);
            std::vector<bool> keep(n, true);
            for (int i = 0; i < n; ++i) {
                char* name = H5Tget_member_name(memtype, i);
                std::string member = name ? name : "";
                H5free_memory(name);
                int fi = H5Tget_member_index(ftype, member.c_str());
                if (fi < 0 && layout && layout->columns.at(i).since > meta.format_version) {
                    keep[i] = false;
                    d.absent.push_back(i);
                    continue;
                }
                if (fi < 0) throw fail(std::string(p) + " lacks the field '" + member + "'");
                if (H5Tget_member_class(ftype, fi) != H5Tget_member_class(memtype, i))
                    throw fail(std::string(p) + " field '" + member + "' has the wrong type class");
            }
            if (!d.absent.empty()) memtype = layout->type(keep);
        }
        d.memtype = std::move(memtype);
        d.cols = cols;
        d.row_bytes = H5Tget_size(ftype) * (cols ? cols : 1);
        if (d.row_bytes == 0) throw fail(std::string(p) + " has an empty element type");
        h5::Id dcpl(H5Dget_create_plist(d.dset));
        hsize_t chunk[2] = {0, 0};
        if (dcpl.valid() && H5Pget_layout(dcpl) == H5D_CHUNKED && H5Pget_chunk(dcpl, 2, chunk) >= 1)
            d.chunk_bytes = chunk[0] > UINT64_MAX / d.row_bytes ? UINT64_MAX : chunk[0] * d.row_bytes;
        read_extent(d);
        return d;
    }

    bool group_and_link_exist(const char* p) {
        // H5Lexists needs each parent group to exist: check them in turn.
        std::string path_s(p);
        for (std::size_t pos = path_s.find('/', 1); pos != std::string::npos; pos = path_s.find('/', pos + 1))
            if (H5Lexists(file, path_s.substr(0, pos).c_str(), H5P_DEFAULT) <= 0) return false;
        return H5Lexists(file, p, H5P_DEFAULT) > 0;
    }

    void read_extent(Dataset& d) {
        h5::Id space(H5Dget_space(d.dset));
        if (!space.valid()) throw fail(std::string("unreadable shape of ") + d.path);
        int rank = H5Sget_simple_extent_ndims(space);
        int want = d.cols ? 2 : 1;
        if (rank != want)
            throw fail(std::string(d.path) + " has rank " + std::to_string(rank) + ", expected " + std::to_string(want));
        hsize_t dims[2] = {0, 0};
        H5Sget_simple_extent_dims(space, dims, nullptr);
        if (d.cols && dims[1] != d.cols)
            throw fail(std::string(d.path) + " has " + std::to_string(dims[1]) + " columns, expected " +
                       std::to_string(d.cols));
        // Every row the writer adds is written: a damaged extent shows as more rows than
        // the file can hold, and is caught before anything is allocated for it.
        // The size on disk now: a SWMR reader's own idea of the file's end stays where it
        // was at open, while the writer keeps appending.
        std::error_code ec;
        const hsize_t file_size = std::filesystem::file_size(path, ec);
        if (ec) throw fail("cannot get the file size: " + ec.message());
        if (dims[0] > file_size / d.row_bytes)
            throw fail(std::string(d.path) + " claims " + std::to_string(dims[0]) +
                       " rows, more than the file's " + std::to_string(file_size) + " bytes can hold");
        // A written chunk takes its whole size on disk (the writer never compresses): a
        // larger chunk is a damaged header that would make HDF5 allocate it to read a row.
        if (dims[0] > 0 && d.chunk_bytes > file_size)
            throw fail(std::string(d.path) + " has chunks of " + std::to_string(d.chunk_bytes) +
                       " bytes, more than the file's " + std::to_string(file_size));
        d.rows = dims[0];
    }

    void read_rows(const Dataset& d, hsize_t start, hsize_t count, void* buf, hid_t memtype = -1) const {
        if (count == 0) return;
        if (!in_bounds(start, count, d.rows))
            throw fail(std::string(d.path) + ": rows [" + std::to_string(start) + ", +" + std::to_string(count) +
                       ") are past its end " + std::to_string(d.rows));
        if (blocks && memtype < 0)
            for (const Block& b : *blocks)
                if (b.d == &d && count <= b.count && start >= b.start && start - b.start <= b.count - count) {
                    std::memcpy(buf, b.bytes.data() + (start - b.start) * b.elem, count * b.elem);
                    return;
                }
        h5::Id space(H5Dget_space(d.dset));
        hsize_t st[2] = {start, 0}, cn[2] = {count, d.cols};
        h5::Id mem(H5Screate_simple(d.cols ? 2 : 1, cn, nullptr));
        if (!space.valid() || !mem.valid() ||
            H5Sselect_hyperslab(space, H5S_SELECT_SET, st, nullptr, cn, nullptr) < 0 ||
            H5Dread(d.dset, memtype >= 0 ? memtype : d.memtype.get(), mem, space, dxpl, buf) < 0)
            throw fail(std::string("cannot read ") + d.path + " (damaged data)");
    }

    template <class T>
    std::vector<T> read_range(const Dataset& d, hsize_t start, hsize_t count) const {
        std::vector<T> v(count);
        read_rows(d, start, count, v.data());
        return v;
    }

    // Rows of a compound table in its layout. Columns the file lacks get their defaults.
    std::vector<unsigned char> read_table(const Dataset& d, hsize_t start, hsize_t count) const {
        std::vector<unsigned char> rows(count * d.layout.size);
        read_rows(d, start, count, rows.data());
        fill_absent(d, rows);
        return rows;
    }
    // Rows at arbitrary positions, in one read (a point selection keeps the given order).
    std::vector<unsigned char> read_table_at(const Dataset& d, const std::vector<hsize_t>& rows) const {
        std::vector<unsigned char> v(rows.size() * d.layout.size);
        if (rows.empty()) return v;
        for (hsize_t r : rows)
            if (r >= d.rows) throw fail(std::string(d.path) + ": row " + std::to_string(r) + " is past its end");
        h5::Id space(H5Dget_space(d.dset));
        hsize_t n = rows.size();
        h5::Id mem(H5Screate_simple(1, &n, nullptr));
        if (!space.valid() || !mem.valid() || H5Sselect_elements(space, H5S_SELECT_SET, n, rows.data()) < 0 ||
            H5Dread(d.dset, d.memtype, mem, space, dxpl, v.data()) < 0)
            throw fail(std::string("cannot read ") + d.path + " (damaged data)");
        fill_absent(d, v);
        return v;
    }
    void fill_absent(const Dataset& d, std::vector<unsigned char>& rows) const {
        if (d.absent.empty()) return;
        for (std::size_t at = 0; at < rows.size(); at += d.layout.size)
            for (std::size_t i : d.absent) {
                const h5::Column& c = d.layout.columns[i];
                std::memcpy(rows.data() + at + c.offset, d.layout.defaults.data() + c.offset, c.size);
            }
    }

    // The records of a one-record table (trace_schema.h's RecordTable, NamesTable).
    template <class Table, class R = std::tuple_element_t<0, typename Table::Objects>>
    std::vector<R> read_records(const Dataset& d, hsize_t start, hsize_t count) const {
        const auto rows = read_table(d, start, count);
        std::vector<R> out(count);
        for (std::size_t i = 0; i < out.size(); ++i) s::get_row<Table>(rows.data() + i * d.layout.size, out[i]);
        return out;
    }

    // The keys of operand or block-map rows, read without the rest of the row.
    std::vector<OperandKey> read_keys(const Dataset& d, hsize_t start, hsize_t count) const {
        std::vector<unsigned char> rows(count * key_layout.size);
        read_rows(d, start, count, rows.data(), key_type);
        std::vector<OperandKey> out(count);
        for (std::size_t i = 0; i < out.size(); ++i) s::get_row<s::KeyTable>(rows.data() + i * key_layout.size, out[i]);
        return out;
    }
    static OperandKey key_at(const unsigned char* row) {
        OperandKey k;
        s::get_row<s::KeyTable>(row, k);
        return k;
    }

    // ---- indexing ----
    void check_run(std::int32_t run, const char* table, hsize_t row) const {
        if (run < 0 || run >= static_cast<int>(meta.runs.size()))
            throw fail(std::string(table) + " row " + std::to_string(row) + ": run " + std::to_string(run) +
                       " is not in /meta/runs");
    }

    int check_key(const OperandKey& k, const char* table, hsize_t row) const {
        check_run(k.run, table, row);
        // Stored as int8: a negative value reads back as a large one.
        const int gemm = static_cast<std::int8_t>(k.gemm), operand = static_cast<std::int8_t>(k.operand);
        if (k.linear < 0 || k.linear >= static_cast<int>(meta.linears.size()) || gemm < 0 || gemm > 2 ||
            operand < 0 || operand > 2)
            throw fail(std::string(table) + " row " + std::to_string(row) + ": linear/gemm/operand " +
                       std::to_string(k.linear) + "/" + std::to_string(gemm) + "/" + std::to_string(operand) +
                       " out of range");
        int slot = operand_slot(k.linear, k.gemm, k.operand);
        if (slot < 0)
            throw fail(std::string(table) + " row " + std::to_string(row) + ": operand " +
                       std::to_string(operand) + " does not belong to gemm " + std::to_string(gemm));
        return slot;
    }

    // Puts (step, row) pairs appended from `tail` on into step order, once per index()
    // (a rewind makes steps go back): the stable sort and merge keep rows of one step in
    // file order, so the later row of a re-recorded step comes last. One O(n log n) pass
    // per batch of new rows, not one per row.
    static std::int64_t step_of(const std::pair<std::int64_t, hsize_t>& e) { return e.first; }
    static std::int64_t step_of(const OpRows& e) { return e.step; }

    template <class Entry>
    static void merge_tail(std::vector<Entry>& v, std::size_t tail) {
        const auto by_step = [](const Entry& a, const Entry& b) { return step_of(a) < step_of(b); };
        const auto mid = v.begin() + static_cast<std::ptrdiff_t>(tail);
        if (!std::is_sorted(mid, v.end(), by_step)) std::stable_sort(mid, v.end(), by_step);
        if (mid != v.begin() && mid != v.end() && by_step(*mid, *(mid - 1))) std::inplace_merge(v.begin(), mid, v.end(), by_step);
    }

    // Calls f(first row, count) over [from, to) in pieces, so that indexing a large table
    // holds one piece of it at a time, not all of it.
    template <class F>
    static void in_chunks(hsize_t from, hsize_t to, F&& f) {
        for (hsize_t at = from; at < to;) {
            const hsize_t n = std::min<hsize_t>(to - at, kIndexChunk);
            f(at, n);
            at += n;
        }
    }

    // Indexes rows added since the last call; true when any were.
    bool index() {
        bool grew = false;
        // Op names first: op rows refer to them.
        if (op_names.rows > meta.ops.size()) {
            for (auto& name : read_records<s::NamesTable>(op_names, meta.ops.size(), op_names.rows - meta.ops.size()))
                meta.ops.push_back(std::move(name));
            grew = true;
        }
        if (steps.rows > indexed_steps) {
            auto rows = read_records<s::StepTable>(steps, indexed_steps, steps.rows - indexed_steps);
            for (std::size_t i = 0; i < rows.size(); ++i) {
                const StepRecord& r = rows[i];
                check_run(r.run, s::kSteps, indexed_steps + i);
                if (r.recipe < -1 || r.recipe >= static_cast<int>(meta.training_recipes.size()))
                    throw fail(std::string(s::kSteps) + " row " + std::to_string(indexed_steps + i) + ": recipe " +
                               std::to_string(r.recipe) + " is not in /meta/training_recipes");
                step_records.push_back(r);
            }
            indexed_steps = steps.rows;
            grew = true;
        }
        if (events.rows > indexed_events) {
            auto rows = read_records<s::EventTable>(events, indexed_events, events.rows - indexed_events);
            for (std::size_t i = 0; i < rows.size(); ++i) {
                EventRecord& r = rows[i];
                if (r.run != -1) check_run(r.run, s::kEvents, indexed_events + i);
                const int kind = static_cast<int>(r.kind);
                if (kind < 0 || kind > static_cast<int>(kLastEventKind))
                    throw fail(std::string(s::kEvents) + " row " + std::to_string(indexed_events + i) +
                               ": unknown event kind " + std::to_string(kind));
                event_records.push_back(std::move(r));
            }
            indexed_events = events.rows;
            grew = true;
        }
        if (ranks.rows > indexed_ranks) {
            auto rows = read_records<s::RankTable>(ranks, indexed_ranks, ranks.rows - indexed_ranks);
            for (std::size_t i = 0; i < rows.size(); ++i) {
                if (rows[i].rank < 0 || rows[i].rank >= meta.world_size)
                    throw fail(std::string(s::kRanks) + " row " + std::to_string(indexed_ranks + i) + ": rank " +
                               std::to_string(rows[i].rank) + " is outside world_size " +
                               std::to_string(meta.world_size));
                rank_records.push_back(rows[i]);
            }
            indexed_ranks = ranks.rows;
            grew = true;
        }
        if (scaling_index.rows > indexed_scaling) {
            if (scaling_amax.rows < scaling_index.rows || scaling_scale.rows < scaling_index.rows)
                throw fail("/scaling/amax or /scaling/scale has fewer rows than /scaling/index");
            in_chunks(indexed_scaling, scaling_index.rows, [&](hsize_t at, hsize_t n) {
                auto rows = read_records<s::ScalingIndexTable>(scaling_index, at, n);
                for (std::size_t i = 0; i < rows.size(); ++i) {
                    check_run(rows[i].run, s::kScalingIndex, at + i);
                    scaling_rows[{rows[i].run, rows[i].step}] = at + i;
                }
            });
            indexed_scaling = scaling_index.rows;
            grew = true;
        }
        if (operands.rows > indexed_operands) {
            std::map<std::pair<std::int32_t, int>, std::size_t> tails;  // (run, slot) -> its first new entry
            in_chunks(indexed_operands, operands.rows, [&](hsize_t at, hsize_t n) {
                auto rows = read_keys(operands, at, n);
                for (std::size_t i = 0; i < rows.size(); ++i) {
                    const hsize_t row = at + i;
                    const int slot = check_key(rows[i], s::kOperands, row);
                    operand_rows[{rows[i].run, rows[i].step}].push_back(row);
                    auto& series = series_rows[{rows[i].run, slot}];
                    tails.try_emplace({rows[i].run, slot}, series.size());
                    series.push_back({rows[i].step, row});
                }
            });
            for (const auto& [key, tail] : tails) merge_tail(series_rows[key], tail);
            indexed_operands = operands.rows;
            grew = true;
        }
        if (blockmaps.rows > indexed_blockmaps) {
            auto rows = read_keys(blockmaps, indexed_blockmaps, blockmaps.rows - indexed_blockmaps);
            for (std::size_t i = 0; i < rows.size(); ++i) {
                check_key(rows[i], s::kBlockMaps, indexed_blockmaps + i);
                blockmap_rows[{rows[i].run, rows[i].step}].push_back(indexed_blockmaps + i);
            }
            indexed_blockmaps = blockmaps.rows;
            grew = true;
        }
        if (ops.rows > indexed_ops) {
            std::vector<std::size_t> tails(op_rows.size());
            for (std::size_t r = 0; r < op_rows.size(); ++r) tails[r] = op_rows[r].size();
            in_chunks(indexed_ops, ops.rows, [&](hsize_t at, hsize_t n) {
                auto rows = read_records<s::OpTable>(ops, at, n);
                for (std::size_t i = 0; i < rows.size(); ++i) {
                    check_run(rows[i].run, s::kOpTimes, at + i);
                    auto& v = op_rows[rows[i].run];
                    const hsize_t row = at + i;
                    if (v.size() > tails[rows[i].run] && v.back().step == rows[i].step &&
                        v.back().first + v.back().count == row)
                        ++v.back().count;
                    else
                        v.push_back({rows[i].step, row, 1});
                }
            });
            for (std::size_t r = 0; r < op_rows.size(); ++r) merge_tail(op_rows[r], tails[r]);
            indexed_ops = ops.rows;
            grew = true;
        }
        return grew;
    }

    // Tables first, then the data they point into: the writer flushes in the opposite
    // order, so every row seen here has its data visible too.
    bool refresh() {
        Dataset* order[] = {&steps, &events, &scaling_index, &operands, &blockmaps, &ops, &op_names,
                            &scaling_amax, &scaling_scale, &errors, &histogram, &channel_absmax, &top,
                            &amax_history, &block_absmax, &block_scale_inv, &block_sqnr, &ranks};
        for (Dataset* d : order) {
            if (!d->dset.valid()) continue;  // an optional dataset the file does not have
            if (H5Drefresh(d->dset) < 0) throw fail(std::string("cannot refresh ") + d->path);
            read_extent(*d);
        }
        return index();
    }

    // ---- decoding rows ----
    void check_span(const Dataset& d, std::uint64_t offset, std::uint64_t count, const char* field,
                    hsize_t row) const {
        if (!in_bounds(offset, count, d.rows))
            throw fail(std::string(s::kOperands) + " row " + std::to_string(row) + ": " + field + " (offset " +
                       std::to_string(offset) + ", count " + std::to_string(count) + ") points past the end of " +
                       d.path + " (" + std::to_string(d.rows) + " rows)");
    }

    std::vector<ErrorStats> read_errors(const s::OperandSpans& r, hsize_t row, bool names) const {
        std::vector<ErrorStats> out;
        if (r.errors_count == 0) return out;
        if (r.errors_count != meta.recipes.size())
            throw fail(std::string(s::kOperands) + " row " + std::to_string(row) + ": errors_count " +
                       std::to_string(r.errors_count) + " differs from the " + std::to_string(meta.recipes.size()) +
                       " recipes");
        check_span(errors, r.errors_offset, r.errors_count, "errors", row);
        const auto rows = read_table(errors, r.errors_offset, r.errors_count);
        out.resize(r.errors_count);
        for (std::size_t i = 0; i < out.size(); ++i) {
            std::int32_t recipe = -1;
            s::get_row<s::ErrorTable>(rows.data() + i * errors.layout.size, recipe, out[i]);
            if (recipe != static_cast<std::int32_t>(i))
                throw fail(std::string(s::kOperandErrors) + " row " + std::to_string(r.errors_offset + i) +
                           ": recipe " + std::to_string(recipe) + ", expected " + std::to_string(i));
            if (names) out[i].recipe = meta.recipes[i];
        }
        return out;
    }

    void check_recipe_in_use(std::int32_t recipe_in_use, hsize_t row) const {
        if (recipe_in_use < -1 || recipe_in_use >= static_cast<int>(meta.recipes.size()))
            throw fail(std::string(s::kOperands) + " row " + std::to_string(row) + ": recipe_in_use " +
                       std::to_string(recipe_in_use) + " is not in /meta/recipes");
    }

    // Reads, for each flat dataset, the range that the spans of `rows` (operand rows in
    // the table's layout) cover, when the spans lie close together (one step's operands
    // were written together). Spans out of bounds are left to decode_operand to report.
    std::vector<Block> read_blocks(const std::vector<unsigned char>& rows, std::size_t n) const {
        struct Range {
            const Dataset* d;
            hsize_t lo = ~hsize_t(0), hi = 0, total = 0;
        } ranges[] = {{&histogram}, {&errors}, {&channel_absmax}, {&top}, {&amax_history}};
        for (std::size_t i = 0; i < n; ++i) {
            OperandRecord o;
            s::OperandSpans r;
            s::get_row<s::OperandTable>(rows.data() + i * operands.layout.size, o, r);
            const std::pair<std::uint64_t, std::uint64_t> spans[] = {{r.hist_offset, r.hist_count},
                                                                     {r.errors_offset, r.errors_count},
                                                                     {r.channel_offset, r.channel_count},
                                                                     {r.top_offset, r.top_count},
                                                                     {r.history_offset, r.history_count}};
            for (std::size_t k = 0; k < std::size(spans); ++k) {
                const auto [offset, count] = spans[k];
                if (count == 0 || !in_bounds(offset, count, ranges[k].d->rows)) continue;
                ranges[k].lo = std::min<hsize_t>(ranges[k].lo, offset);
                ranges[k].hi = std::max<hsize_t>(ranges[k].hi, offset + count);
                ranges[k].total += count;
            }
        }
        std::vector<Block> out;
        for (const Range& g : ranges) {
            if (g.total == 0 || g.hi - g.lo > 2 * g.total + 4096) continue;  // scattered: row by row
            Block b;
            b.d = g.d;
            b.start = g.lo;
            b.count = g.hi - g.lo;
            b.elem = H5Tget_size(g.d->memtype) * (g.d->cols ? g.d->cols : 1);
            b.bytes.resize(b.count * b.elem);
            read_rows(*g.d, b.start, b.count, b.bytes.data());
            out.push_back(std::move(b));
        }
        return out;
    }

    OperandRecord decode_operand(const unsigned char* bytes, hsize_t row) const {
        OperandRecord o;
        s::OperandSpans r;
        s::get_row<s::OperandTable>(bytes, o, r);
        check_recipe_in_use(o.recipe_in_use, row);
        TensorStats& st = o.stats;
        if (r.hist_count > 0) {
            // 64-bit: min_exp near INT32_MAX must not wrap into a small, "valid" bin index.
            const std::int64_t first_bin = std::int64_t(r.hist_min_exp) - kHistMinExp;
            if (first_bin < 0 || r.hist_count > static_cast<std::uint64_t>(kHistBins) ||
                first_bin + static_cast<std::int64_t>(r.hist_count) > kHistBins)
                throw fail(std::string(s::kOperands) + " row " + std::to_string(row) + ": histogram span (min_exp " +
                           std::to_string(r.hist_min_exp) + ", count " + std::to_string(r.hist_count) +
                           ") is outside the exponent range");
            check_span(histogram, r.hist_offset, r.hist_count, "histogram", row);
            read_rows(histogram, r.hist_offset, r.hist_count, &st.histogram.bins[std::size_t(first_bin)]);
        }
        check_span(channel_absmax, r.channel_offset, r.channel_count, "channel_absmax", row);
        st.outliers.channel_absmax = read_range<float>(channel_absmax, r.channel_offset, r.channel_count);
        check_span(top, r.top_offset, r.top_count, "top", row);
        st.outliers.top = read_records<s::TopTable>(top, r.top_offset, r.top_count);
        check_span(amax_history, r.history_offset, r.history_count, "amax_history", row);
        o.amax_history = read_range<float>(amax_history, r.history_offset, r.history_count);
        o.errors = read_errors(r, row, true);
        return o;
    }

    BlockMapRecord decode_blockmap(const unsigned char* bytes, hsize_t row) const {
        BlockMapRecord b;
        s::BlockMapSpan r;
        s::get_row<s::BlockMapTable>(bytes, b, r);
        std::string where = std::string(s::kBlockMaps) + " row " + std::to_string(row) + ": ";
        if (b.recipe < 0 || b.recipe >= static_cast<int>(meta.recipes.size()))
            throw fail(where + "recipe " + std::to_string(b.recipe) + " is not in /meta/recipes");
        if (b.grid_rows < 0 || b.grid_cols < 0 ||
            static_cast<std::uint64_t>(b.grid_rows) * static_cast<std::uint64_t>(b.grid_cols) != r.count)
            throw fail(where + "grid " + std::to_string(b.grid_rows) + "x" + std::to_string(b.grid_cols) +
                       " does not match count " + std::to_string(r.count));
        for (const Dataset* d : {&block_absmax, &block_scale_inv, &block_sqnr})
            if (!in_bounds(r.offset, r.count, d->rows))
                throw fail(where + "(offset " + std::to_string(r.offset) + ", count " + std::to_string(r.count) +
                           ") points past the end of " + d->path);
        b.absmax = read_range<float>(block_absmax, r.offset, r.count);
        b.scale_inv = read_range<float>(block_scale_inv, r.offset, r.count);
        b.sqnr_db = read_range<float>(block_sqnr, r.offset, r.count);
        return b;
    }
};

TraceReader::TraceReader(const std::string& path) : impl_(std::make_unique<Impl>()) {
    impl_->path = path;
    try {
        impl_->open();
    } catch (const h5::Error& e) {
        throw TraceError(path, e.what());
    }
}
TraceReader::~TraceReader() = default;
TraceReader::TraceReader(TraceReader&&) noexcept = default;
TraceReader& TraceReader::operator=(TraceReader&&) noexcept = default;

const std::string& TraceReader::path() const { return impl_->path; }
const TraceMeta& TraceReader::meta() const { return impl_->meta; }
bool TraceReader::refresh() { return impl_->refresh(); }

std::vector<StepRecord> TraceReader::steps(int run) const {
    std::vector<StepRecord> out;
    for (const auto& s : impl_->step_records)
        if (s.run == run) out.push_back(s);
    return out;
}

std::int64_t TraceReader::last_step(int run) const {
    std::int64_t last = -1;
    for (const auto& s : impl_->step_records)
        if (s.run == run) last = std::max(last, s.step);
    return last;
}

std::vector<EventRecord> TraceReader::events() const { return impl_->event_records; }

std::vector<RankStepRecord> TraceReader::rank_steps() const { return impl_->rank_records; }

std::vector<ScalingRecord> TraceReader::scaling(int run, std::int64_t from, std::int64_t to) const {
    const Impl& d = *impl_;
    std::vector<ScalingRecord> out;
    auto it = d.scaling_rows.lower_bound({run, from});
    for (; it != d.scaling_rows.end() && it->first.first == run && it->first.second <= to; ++it) {
        ScalingRecord r;
        r.run = run;
        r.step = it->first.second;
        std::vector<float> amax(d.scaling_amax.cols), scale(d.scaling_amax.cols);
        d.read_rows(d.scaling_amax, it->second, 1, amax.data());
        d.read_rows(d.scaling_scale, it->second, 1, scale.data());
        amax.resize(d.slots);
        scale.resize(d.slots);
        r.amax = std::move(amax);
        r.scale = std::move(scale);
        out.push_back(std::move(r));
    }
    return out;
}

std::vector<std::int64_t> TraceReader::row_steps(int run, std::int64_t from, std::int64_t to) const {
    const Impl& d = *impl_;
    std::vector<std::int64_t> out;
    for (auto it = d.scaling_rows.lower_bound({run, from});
         it != d.scaling_rows.end() && it->first.first == run && it->first.second <= to; ++it)
        out.push_back(it->first.second);
    if (run >= 0 && run < static_cast<int>(d.op_rows.size())) {
        const auto& v = d.op_rows[run];
        auto lo = std::lower_bound(v.begin(), v.end(), from, [](const auto& a, std::int64_t s) { return a.step < s; });
        for (auto it = lo; it != v.end() && it->step <= to; ++it) out.push_back(it->step);
    }
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
}

std::vector<std::int64_t> TraceReader::capture_steps(int run) const {
    std::vector<std::int64_t> out;
    for (auto it = impl_->operand_rows.lower_bound({run, INT64_MIN});
         it != impl_->operand_rows.end() && it->first.first == run; ++it)
        out.push_back(it->first.second);
    return out;
}

std::optional<OperandRecord> TraceReader::operand(const OperandKey& key) const {
    const Impl& d = *impl_;
    auto it = d.operand_rows.find({key.run, key.step});
    if (it == d.operand_rows.end()) return std::nullopt;
    int slot = operand_slot(key.linear, key.gemm, key.operand);
    if (slot < 0) return std::nullopt;
    const auto rows = d.read_table_at(d.operands, it->second);
    const std::size_t n = d.operands.layout.size;
    // The last row wins: a step recorded again after a rewind replaces the first.
    for (std::size_t i = it->second.size(); i-- > 0;) {
        const OperandKey k = Impl::key_at(rows.data() + i * n);
        if (k.linear == key.linear && k.gemm == key.gemm && k.operand == key.operand)
            return d.decode_operand(rows.data() + i * n, it->second[i]);
    }
    return std::nullopt;
}

std::vector<OperandRecord> TraceReader::operands(int run, std::int64_t step) const {
    const Impl& d = *impl_;
    std::vector<OperandRecord> out;
    auto it = d.operand_rows.find({run, step});
    if (it == d.operand_rows.end()) return out;
    const auto rows = d.read_table_at(d.operands, it->second);
    const std::size_t n = d.operands.layout.size;
    std::map<int, std::size_t> last;  // slot -> index of its newest row
    for (std::size_t i = 0; i < it->second.size(); ++i) {
        const OperandKey k = Impl::key_at(rows.data() + i * n);
        last[operand_slot(k.linear, k.gemm, k.operand)] = i;
    }
    const auto blocks = d.read_blocks(rows, it->second.size());
    d.blocks = &blocks;
    struct Unset {
        const Impl& d;
        ~Unset() { d.blocks = nullptr; }
    } unset{d};
    for (const auto& [slot, i] : last) out.push_back(d.decode_operand(rows.data() + i * n, it->second[i]));
    return out;
}

std::vector<OperandPoint> TraceReader::operand_series(int run, int linear, Gemm gemm, Operand operand) const {
    const Impl& d = *impl_;
    std::vector<OperandPoint> out;
    auto it = d.series_rows.find({run, operand_slot(linear, gemm, operand)});
    if (it == d.series_rows.end()) return out;
    std::vector<hsize_t> idx;
    for (const auto& [step, row] : it->second) idx.push_back(row);
    const auto rows = d.read_table_at(d.operands, idx);
    OperandRecord r;  // reused: only the row's own columns are read into it
    s::OperandSpans spans;
    for (std::size_t i = 0; i < idx.size(); ++i) {
        s::get_row<s::OperandTable>(rows.data() + i * d.operands.layout.size, r, spans);
        d.check_recipe_in_use(r.recipe_in_use, idx[i]);
        OperandPoint p;
        p.step = r.key.step;
        p.recipe_in_use = r.recipe_in_use;
        p.amax = r.stats.amax;
        p.scale = r.scale;
        p.kurtosis = r.stats.outliers.kurtosis;
        p.dynamic_range = r.stats.dynamic_range;
        p.errors = d.read_errors(spans, idx[i], false);
        // A step recorded again after a rewind replaces the earlier point.
        if (!out.empty() && out.back().step == p.step) out.back() = std::move(p);
        else out.push_back(std::move(p));
    }
    return out;
}

std::vector<std::int64_t> TraceReader::blockmap_steps(int run) const {
    std::vector<std::int64_t> out;
    for (auto it = impl_->blockmap_rows.lower_bound({run, INT64_MIN});
         it != impl_->blockmap_rows.end() && it->first.first == run; ++it)
        out.push_back(it->first.second);
    return out;
}

std::vector<BlockMapRecord> TraceReader::blockmaps(const OperandKey& key) const {
    const Impl& d = *impl_;
    std::vector<BlockMapRecord> out;
    auto it = d.blockmap_rows.find({key.run, key.step});
    if (it == d.blockmap_rows.end()) return out;
    const auto rows = d.read_table_at(d.blockmaps, it->second);
    const std::size_t n = d.blockmaps.layout.size;
    std::map<int, std::size_t> last;  // recipe -> newest row of this operand
    for (std::size_t i = 0; i < it->second.size(); ++i) {
        BlockMapRecord b;
        s::BlockMapSpan span;
        s::get_row<s::BlockMapTable>(rows.data() + i * n, b, span);
        if (b.key.linear == key.linear && b.key.gemm == key.gemm && b.key.operand == key.operand) last[b.recipe] = i;
    }
    for (const auto& [recipe, i] : last) out.push_back(d.decode_blockmap(rows.data() + i * n, it->second[i]));
    return out;
}

std::vector<OpRecord> TraceReader::ops(int run, std::int64_t from, std::int64_t to) const {
    const Impl& d = *impl_;
    std::vector<OpRecord> out;
    if (run < 0 || run >= static_cast<int>(d.op_rows.size())) return out;
    const auto& v = d.op_rows[run];
    auto lo = std::lower_bound(v.begin(), v.end(), from, [](const auto& a, std::int64_t s) { return a.step < s; });
    std::vector<hsize_t> idx;
    for (auto it = lo; it != v.end() && it->step <= to; ++it)
        for (hsize_t k = 0; k < it->count; ++k) idx.push_back(it->first + k);
    const auto rows = d.read_table_at(d.ops, idx);
    out.resize(idx.size());
    for (std::size_t i = 0; i < idx.size(); ++i) {
        OpRecord& r = out[i];
        s::get_row<s::OpTable>(rows.data() + i * d.ops.layout.size, r);
        if (r.op < 0 || static_cast<std::size_t>(r.op) >= d.meta.ops.size())
            throw d.fail(std::string(s::kOpTimes) + " row " + std::to_string(idx[i]) + ": op " + std::to_string(r.op) +
                         " is not in /meta/ops");
    }
    return out;
}

}  // namespace fp8scope::trace
