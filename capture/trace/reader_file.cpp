// Opening a trace file and reading its rows (reader_file.h).
#include "reader_file.h"

#include <cstring>
#include <filesystem>
#include <limits>
#include <stdexcept>

namespace fp8scope::trace {
namespace s = schema;

namespace {

constexpr unsigned kReadAttempts = 10;
constexpr std::size_t kConversionBuffer = 64u << 10;
// Deflate shrinks its input at most 1032-fold (zlib's bound): a deflated dataset's rows
// cannot take more than this many times the file's size.
constexpr hsize_t kMaxDeflateRatio = 1032;
// The writer's chunks are at most 1 MiB (docs/trace-format.md); a deflated chunk's size
// says nothing about the file's, so a damaged one is caught by this bound instead.
constexpr hsize_t kMaxDeflatedChunkBytes = 64u << 20;

// The filters of a dataset: shuffle and deflate, which every HDF5 build has, or none. True
// when it has them; a TraceError naming the dataset for any other (a plugin, damage).
bool deflated_chunks(const TraceFile& f, hid_t dcpl, const char* p) {
    const int n = H5Pget_nfilters(dcpl);
    if (n < 0) throw f.fail(std::string("unreadable filters of ") + p + " (damaged?)");
    for (int i = 0; i < n; ++i) {
        unsigned flags = 0;
        std::size_t nvalues = 0;
        char name[64] = {};
        const H5Z_filter_t id = H5Pget_filter2(dcpl, unsigned(i), &flags, &nvalues, nullptr, sizeof name, name, nullptr);
        if (id != H5Z_FILTER_SHUFFLE && id != H5Z_FILTER_DEFLATE)
            throw f.fail(std::string(p) + " is stored with HDF5 filter " + std::to_string(id) + " ('" + name +
                         "'); traces use only shuffle and deflate");
        if (H5Zfilter_avail(id) <= 0)
            throw f.fail(std::string(p) + " needs the HDF5 filter '" + name + "', which this HDF5 build lacks");
    }
    return n > 0;
}

}  // namespace

void TraceFile::open(TraceMeta& meta) {
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
    handle = h5::Id(H5Fopen(path.c_str(), H5F_ACC_RDONLY | H5F_ACC_SWMR_READ, fapl));
    if (!handle.valid()) handle = h5::Id(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
    if (!handle.valid()) throw fail("damaged or truncated HDF5 file: the library cannot open it");

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
    format_version = meta.format_version;
    read_meta_attrs(meta);

    runs = open_table<s::RunTable>(s::kRuns);
    linears = open_table<s::LinearTable>(s::kLinears);
    const bool before4 = format_version < 4;
    quantizers = open_table<s::NamesTable>(before4 ? s::kQuantizersBefore4 : s::kQuantizers);
    training_recipes = open_table<s::NamesTable>(before4 ? s::kRecipesBefore4 : s::kRecipes);
    op_names = open_table<s::NamesTable>(s::kOps);
    meta.runs = read_records<s::RunTable>(runs, 0, runs.rows);
    meta.linears = read_records<s::LinearTable>(linears, 0, linears.rows);
    meta.quantizers = read_records<s::NamesTable>(quantizers, 0, quantizers.rows);
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
    if (format_version >= 6) kernel_steps = open_table<s::KernelStepTable>(s::kKernelSteps);
    if (format_version >= 7) gate_up = open_table<s::GateUpAlignmentTable>(s::kGateUpAlignment);
    // Single-process runs and files before format 3 have no rank records.
    if (H5Lexists(handle, s::kRanks + 1, H5P_DEFAULT) > 0) ranks = open_table<s::RankTable>(s::kRanks);
    if (H5Lexists(handle, s::kGemmErrors + 1, H5P_DEFAULT) > 0)
        gemm_errors = open_table<s::GemmErrorTable>(s::kGemmErrors);
    if (H5Lexists(handle, s::kPrecision + 1, H5P_DEFAULT) > 0) {
        precision = open_table<s::PrecisionTable>(s::kPrecision);
        meta.precision = read_records<s::PrecisionTable>(precision, 0, precision.rows);
    }
    if (H5Lexists(handle, s::kInjections + 1, H5P_DEFAULT) > 0) {
        injections = open_table<s::InjectionTable>(s::kInjections);
        meta.injections = read_records<s::InjectionTable>(injections, 0, injections.rows);
    }
    key_layout = s::layout<s::KeyTable>();
    key_type = key_layout.type();
    // Indexing reads the key columns alone; an operand or block-map row starts with
    // them (trace_schema.h), so the same bytes decode as a key.
    for (const Dataset* d : {&operands, &blockmaps})
        for (std::size_t i = 0; i < key_layout.columns.size(); ++i)
            if (d->layout.columns.at(i).name != key_layout.columns[i].name ||
                d->layout.columns[i].offset != key_layout.columns[i].offset)
                throw std::logic_error(std::string(d->path) + ": the key columns do not lead the row");
}

void TraceFile::refresh() {
    Dataset* order[] = {&steps, &events, &scaling_index, &operands, &blockmaps, &ops, &kernel_steps, &op_names,
                        &scaling_amax, &scaling_scale, &errors, &histogram, &channel_absmax, &top,
                        &amax_history, &block_absmax, &block_scale_inv, &block_sqnr, &ranks, &gemm_errors, &gate_up};
    for (Dataset* d : order) {
        if (!d->dset.valid()) continue;  // an optional dataset the file does not have
        if (H5Drefresh(d->dset) < 0) throw fail(std::string("cannot refresh ") + d->path);
        read_extent(*d);
    }
}

bool TraceFile::read_string_attr(const char* name, std::string& out) {
    if (H5Aexists(handle, name) <= 0) return false;
    h5::Id attr(H5Aopen(handle, name, H5P_DEFAULT));
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

void TraceFile::read_meta_attrs(TraceMeta& meta) {
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

bool TraceFile::read_int_attr(const char* name, std::int64_t& out) {
    if (H5Aexists(handle, name) <= 0) return false;
    h5::Id attr(H5Aopen(handle, name, H5P_DEFAULT));
    if (!attr.valid()) return false;
    h5::Id type(H5Aget_type(attr));
    h5::Id space(H5Aget_space(attr));
    if (!type.valid() || !space.valid() || H5Tget_class(type) != H5T_INTEGER ||
        H5Sget_simple_extent_npoints(space) != 1)
        return false;
    return H5Aread(attr, H5T_NATIVE_INT64, &out) >= 0;
}

Dataset TraceFile::open_ds(const char* p, h5::Id memtype, hsize_t cols, const h5::Layout* layout) {
    Dataset d;
    d.path = p;
    if (H5Lexists(handle, p + 1, H5P_DEFAULT) <= 0 && !group_and_link_exist(p))
        throw fail(std::string("missing dataset ") + p);
    d.dset = h5::Id(H5Dopen2(handle, p, H5P_DEFAULT));
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
            if (fi < 0 && layout && layout->columns.at(i).since > format_version) {
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
    // bfloat16 widens by a shift; HDF5's conversion of it goes bit by bit, 50x slower.
    d.bfloat16 = H5Tequal(memtype, H5T_NATIVE_FLOAT) > 0 &&
                 H5Tequal(ftype, h5::bfloat16_type()) > 0;
    d.memtype = std::move(memtype);
    d.cols = cols;
    d.row_bytes = H5Tget_size(ftype) * (cols ? cols : 1);
    if (d.row_bytes == 0) throw fail(std::string(p) + " has an empty element type");
    h5::Id dcpl(H5Dget_create_plist(d.dset));
    hsize_t chunk[2] = {0, 0};
    if (dcpl.valid() && H5Pget_layout(dcpl) == H5D_CHUNKED && H5Pget_chunk(dcpl, 2, chunk) >= 1)
        d.chunk_bytes = chunk[0] > UINT64_MAX / d.row_bytes ? UINT64_MAX : chunk[0] * d.row_bytes;
    if (dcpl.valid()) d.deflated = deflated_chunks(*this, dcpl, p);
    read_extent(d);
    return d;
}

bool TraceFile::group_and_link_exist(const char* p) {
    // H5Lexists needs each parent group to exist: check them in turn.
    std::string path_s(p);
    for (std::size_t pos = path_s.find('/', 1); pos != std::string::npos; pos = path_s.find('/', pos + 1))
        if (H5Lexists(handle, path_s.substr(0, pos).c_str(), H5P_DEFAULT) <= 0) return false;
    return H5Lexists(handle, p, H5P_DEFAULT) > 0;
}

void TraceFile::read_extent(Dataset& d) {
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
    // the file can hold, and is caught before anything is allocated for it. Deflated rows
    // take at least 1/kMaxDeflateRatio of their size.
    // The size on disk now: a SWMR reader's own idea of the file's end stays where it
    // was at open, while the writer keeps appending.
    std::error_code ec;
    const hsize_t file_size = std::filesystem::file_size(path, ec);
    if (ec) throw fail("cannot get the file size: " + ec.message());
    const hsize_t holds = file_size / d.row_bytes * (d.deflated ? kMaxDeflateRatio : 1);
    if (dims[0] > holds)
        throw fail(std::string(d.path) + " claims " + std::to_string(dims[0]) + " rows, more than the file's " +
                   std::to_string(file_size) + " bytes can hold" + (d.deflated ? " deflated" : ""));
    // A written chunk takes its whole size on disk unless it is deflated: a larger chunk
    // is a damaged header that would make HDF5 allocate it to read a row.
    if (dims[0] > 0 && !d.deflated && d.chunk_bytes > file_size)
        throw fail(std::string(d.path) + " has chunks of " + std::to_string(d.chunk_bytes) +
                   " bytes, more than the file's " + std::to_string(file_size));
    if (dims[0] > 0 && d.deflated && d.chunk_bytes > std::min(kMaxDeflatedChunkBytes, file_size * kMaxDeflateRatio))
        throw fail(std::string(d.path) + " has deflated chunks of " + std::to_string(d.chunk_bytes) +
                   " bytes, more than a trace's " + std::to_string(kMaxDeflatedChunkBytes) +
                   " or what the file's " + std::to_string(file_size) + " bytes can hold");
    d.rows = dims[0];
}

void TraceFile::read_rows(const Dataset& d, hsize_t start, hsize_t count, void* buf, hid_t memtype) const {
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
    const bool widen = d.bfloat16 && memtype < 0;
    std::vector<std::uint16_t> halves(widen ? count * (d.cols ? d.cols : 1) : 0);
    const h5::Id bf16 = widen ? h5::bfloat16_type() : h5::Id();
    if (!space.valid() || !mem.valid() ||
        H5Sselect_hyperslab(space, H5S_SELECT_SET, st, nullptr, cn, nullptr) < 0 ||
        H5Dread(d.dset, widen ? bf16.get() : memtype >= 0 ? memtype : d.memtype.get(), mem, space, dxpl,
                widen ? static_cast<void*>(halves.data()) : buf) < 0)
        throw fail(std::string("cannot read ") + d.path + " (damaged data)");
    for (std::size_t i = 0; i < halves.size(); ++i) {
        const std::uint32_t bits = std::uint32_t(halves[i]) << 16;
        std::memcpy(static_cast<unsigned char*>(buf) + i * sizeof(float), &bits, sizeof bits);
    }
}

std::vector<unsigned char> TraceFile::read_table(const Dataset& d, hsize_t start, hsize_t count) const {
    std::vector<unsigned char> rows(count * d.layout.size);
    read_rows(d, start, count, rows.data());
    fill_absent(d, rows);
    return rows;
}

std::vector<unsigned char> TraceFile::read_table_at(const Dataset& d, const std::vector<hsize_t>& rows) const {
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

void TraceFile::fill_absent(const Dataset& d, std::vector<unsigned char>& rows) const {
    if (d.absent.empty()) return;
    for (std::size_t at = 0; at < rows.size(); at += d.layout.size)
        for (std::size_t i : d.absent) {
            const h5::Column& c = d.layout.columns[i];
            std::memcpy(rows.data() + at + c.offset, d.layout.defaults.data() + c.offset, c.size);
        }
}

std::vector<OperandKey> TraceFile::read_keys(const Dataset& d, hsize_t start, hsize_t count) const {
    std::vector<unsigned char> rows(count * key_layout.size);
    read_rows(d, start, count, rows.data(), key_type);
    std::vector<OperandKey> out(count);
    for (std::size_t i = 0; i < out.size(); ++i) s::get_row<s::KeyTable>(rows.data() + i * key_layout.size, out[i]);
    return out;
}

}  // namespace fp8scope::trace
