// The SWMR trace writer. The writer thread owns every HDF5 call after construction.
// Rows are buffered per table and written at each flush, flat datasets (histograms,
// channel absmax, maps, ...) before the tables whose (offset, count) columns point into
// them, each flushed in that order: a reader, or a file left by a killed run, never holds
// a row that points past the end of its data.
#include "trace_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <ctime>
#include <deque>
#include <limits>
#include <mutex>
#include <thread>
#include <type_traits>

#include "h5.h"
#include "trace_schema.h"
#include "util/host_name.h"

namespace fp8scope::trace {
namespace s = schema;

namespace {

constexpr std::size_t kEarlyFlushBytes = 16u << 20;  // flush before buffers grow past this
// A compressed chunk rewritten under SWMR lands at a new place in the file and its old
// place is never reused while the file is open (HDF5 1.10): a partial chunk rewritten at
// every flush would cost the file a chunk per flush. So compressed tables write each chunk
// once (Storage::Padded, Storage::WholeChunks), and a table's partial last chunk waits this
// long between rewrites.
constexpr auto kTailInterval = std::chrono::seconds(10);
constexpr unsigned kDeflateLevel = 1;  // 2 % larger than level 6, at a fraction of its time

// The upper half of a float32, rounded to the nearest, ties to even (HDF5's own conversion
// rounds ties away from zero); a NaN stays a quiet NaN.
std::uint16_t to_bfloat16(float x) {
    std::uint32_t u;
    std::memcpy(&u, &x, sizeof u);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<std::uint16_t>((u >> 16) | 0x0040u);
    return static_cast<std::uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

// How a dataset is stored (docs/trace-format.md, "Storage").
enum class Storage {
    Plain,        // uncompressed: every flush writes its rows in place
    Padded,       // compressed; rows are only reached through (offset, count) spans, so each
                  // flush pads its rows with zeros to whole chunks: every chunk written once
    WholeChunks,  // compressed; rows are read by position, so a flush writes whole chunks and
                  // the partial last one only every kTailInterval (and at close)
};

// One appendable dataset: 1-D rows of a compound/atomic type, or 2-D with `cols` fixed.
struct Table {
    const char* path = nullptr;
    h5::Id dset, memtype;
    std::size_t row_bytes = 0;
    hsize_t cols = 0;  // 0: 1-D
    hsize_t rows = 0;  // in the file
    hsize_t chunk_rows = 1;
    Storage storage = Storage::Plain;
    std::chrono::steady_clock::time_point tail_at{};  // the partial last chunk last written
    std::vector<unsigned char> pending;

    hsize_t pending_rows() const { return pending.size() / row_bytes; }
    hsize_t total() const { return rows + pending_rows(); }
    void push(const void* p, hsize_t n) {
        auto* b = static_cast<const unsigned char*>(p);
        pending.insert(pending.end(), b, b + n * row_bytes);
    }
    template <class T>
    void push_row(const T& row) { push(&row, 1); }
    // Floats, as bfloat16 in a bfloat16 table (make_bfloat16s).
    bool bfloat16 = false;
    void push_floats(const float* p, hsize_t n) {
        if (!bfloat16) return push(p, n);
        const std::size_t at = pending.size();
        pending.resize(at + n * sizeof(std::uint16_t));
        for (hsize_t i = 0; i < n; ++i) {
            const std::uint16_t b = to_bfloat16(p[i]);
            std::memcpy(pending.data() + at + i * sizeof b, &b, sizeof b);
        }
    }

    // `tail`: also the rows of a WholeChunks table's partial last chunk.
    void write(bool tail = true) {
        if (storage == Storage::Padded && pending_rows() % chunk_rows)
            pending.resize((pending_rows() / chunk_rows + 1) * chunk_rows * row_bytes);
        hsize_t n = pending_rows();
        if (storage == Storage::WholeChunks && !tail) {
            const hsize_t end = (rows + n) / chunk_rows * chunk_rows;
            n = end > rows ? end - rows : 0;
        }
        if (n == 0) return;
        hsize_t dims[2] = {rows + n, cols};
        h5::check(H5Dset_extent(dset, dims), std::string("extending ") + path);
        h5::Id space = h5::check(H5Dget_space(dset), path);
        hsize_t start[2] = {rows, 0}, count[2] = {n, cols};
        h5::check(H5Sselect_hyperslab(space, H5S_SELECT_SET, start, nullptr, count, nullptr), path);
        h5::Id mem = h5::check(H5Screate_simple(cols ? 2 : 1, count, nullptr), path);
        h5::check(H5Dwrite(dset, memtype, mem, space, H5P_DEFAULT, pending.data()), std::string("writing ") + path);
        rows += n;
        pending.erase(pending.begin(), pending.begin() + static_cast<std::ptrdiff_t>(n * row_bytes));
    }
    void flush() { h5::check(H5Dflush(dset), std::string("flushing ") + path); }
};

// A table of compound rows whose columns are the schema table `Desc` (trace_schema.h).
template <class Desc>
struct RowTable : Table {
    template <class... O>
    void add(const O&... objects) {
        const std::size_t at = pending.size();
        pending.resize(at + row_bytes);
        s::put_row<Desc>(pending.data() + at, objects...);
    }
};

std::string now_iso8601() {
    std::time_t t = std::time(nullptr);
    std::tm tm{};
    gmtime_r(&t, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return buf;
}

void write_string_attr(hid_t obj, const char* name, const std::string& value) {
    h5::Id type = h5::check(H5Tcopy(H5T_C_S1), "H5Tcopy");
    h5::check(H5Tset_size(type, H5T_VARIABLE), "H5Tset_size");
    h5::check(H5Tset_cset(type, H5T_CSET_UTF8), "H5Tset_cset");
    h5::Id space = h5::check(H5Screate(H5S_SCALAR), "H5Screate");
    h5::Id attr = h5::check(H5Acreate2(obj, name, type, space, H5P_DEFAULT, H5P_DEFAULT),
                            std::string("creating attribute ") + name);
    const char* p = value.c_str();
    h5::check(H5Awrite(attr, type, &p), std::string("writing attribute ") + name);
}

void write_int_attr(hid_t obj, const char* name, std::int64_t value) {
    h5::Id space = h5::check(H5Screate(H5S_SCALAR), "H5Screate");
    h5::Id attr = h5::check(H5Acreate2(obj, name, H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT),
                            std::string("creating attribute ") + name);
    h5::check(H5Awrite(attr, H5T_NATIVE_INT64, &value), std::string("writing attribute ") + name);
}

}  // namespace

struct TraceWriter::Impl {
    std::string path;
    TraceMeta meta;
    TraceWriterOptions options;
    h5::Id file;

    RowTable<s::RunTable> runs;
    RowTable<s::LinearTable> linears;
    RowTable<s::NamesTable> quantizers, training_recipes, ops_names, gemms, operands_names, event_kinds;
    RowTable<s::StepTable> steps;
    RowTable<s::EventTable> events;
    RowTable<s::ScalingIndexTable> scaling_index;
    Table scaling_amax, scaling_scale;
    RowTable<s::OperandTable> operands;
    RowTable<s::ErrorTable> errors;
    RowTable<s::TopTable> top;
    Table histogram, channel_absmax, amax_history;
    RowTable<s::BlockMapTable> blockmaps;
    Table block_absmax, block_scale_inv, block_sqnr;
    RowTable<s::OpTable> ops;
    RowTable<s::KernelStepTable> kernel_steps;
    RowTable<s::RankTable> ranks;
    RowTable<s::GemmErrorTable> gemm_errors;
    RowTable<s::GateUpAlignmentTable> gate_up;
    RowTable<s::PrecisionTable> precision;
    RowTable<s::InjectionTable> injections;
    hsize_t slots = 0;

    // Queue shared with producers.
    std::mutex mu;
    std::condition_variable wake, space, flushed_cv;
    std::deque<Record> queue;
    std::size_t ops_known = 0;  // op names registered by producers (check_record)
    std::uint64_t flush_requested = 0, flush_done = 0, flush_count = 0;
    bool closing = false, closed = false;
    std::string error;  // writer thread failure
    std::thread thread;

    TraceError fail(const std::string& problem) const { return TraceError(path, problem); }

    // An appendable dataset of `memtype` elements; compound types are stored packed.
    void make_dataset(Table& t, const char* p, h5::Id memtype, hsize_t chunk_rows, hsize_t cols = 0,
                      Storage storage = Storage::Plain) {
        t.path = p;
        t.row_bytes = H5Tget_size(memtype) * (cols ? cols : 1);
        t.cols = cols;
        t.chunk_rows = chunk_rows;
        t.storage = storage;
        const bool as_is = H5Tget_class(memtype) == H5T_COMPOUND || H5Tget_size(memtype) == 2;  // compound, bfloat16
        h5::Id filetype = as_is ? h5::Id(H5Tcopy(memtype))
                          : H5Tequal(memtype, H5T_NATIVE_FLOAT) > 0 ? h5::Id(H5Tcopy(H5T_IEEE_F32LE))
                                                                    : h5::Id(H5Tcopy(H5T_STD_I64LE));
        if (H5Tget_class(memtype) == H5T_COMPOUND) h5::check(H5Tpack(filetype), "H5Tpack");
        hsize_t dims[2] = {0, cols}, maxdims[2] = {H5S_UNLIMITED, cols}, chunk[2] = {chunk_rows, cols};
        int rank = cols ? 2 : 1;
        h5::Id space = h5::check(H5Screate_simple(rank, dims, maxdims), p);
        h5::Id dcpl = h5::check(H5Pcreate(H5P_DATASET_CREATE), p);
        h5::check(H5Pset_chunk(dcpl, rank, chunk), p);
        if (storage != Storage::Plain) {
            h5::check(H5Pset_shuffle(dcpl), std::string("shuffle filter of ") + p);
            h5::check(H5Pset_deflate(dcpl, kDeflateLevel), std::string("deflate filter of ") + p);
        }
        h5::Id lcpl = h5::check(H5Pcreate(H5P_LINK_CREATE), p);
        h5::check(H5Pset_create_intermediate_group(lcpl, 1), p);
        t.dset = h5::check(H5Dcreate2(file, p, filetype, space, lcpl, dcpl, H5P_DEFAULT),
                           std::string("creating ") + p);
        t.memtype = std::move(memtype);
    }
    Table make_table(const char* p, h5::Id memtype, hsize_t chunk_rows, hsize_t cols = 0,
                     Storage storage = Storage::Plain) {
        Table t;
        make_dataset(t, p, std::move(memtype), chunk_rows, cols, storage);
        return t;
    }
    Table make_floats(const char* p, hsize_t chunk_rows, Storage storage) {
        return make_table(p, h5::Id(H5Tcopy(H5T_NATIVE_FLOAT)), chunk_rows, 0, storage);
    }
    // Floats whose figure needs only 8 significant bits, stored as bfloat16 (converted on
    // this thread, by push_floats).
    Table make_bfloat16s(const char* p, hsize_t chunk_rows, Storage storage) {
        Table t = make_table(p, h5::bfloat16_type(), chunk_rows, 0, storage);
        t.bfloat16 = true;
        return t;
    }
    template <class Desc>
    RowTable<Desc> make_table(const char* p, hsize_t chunk_rows, Storage storage = Storage::Plain) {
        RowTable<Desc> t;
        make_dataset(t, p, s::layout<Desc>().type(), chunk_rows, 0, storage);
        return t;
    }

    // Names go into fixed-width columns: one that does not fit is an error, not cut.
    template <class Desc, class O>
    void check_fits(const char* what, const O& object) const {
        Desc::columns([&](const auto& name, const auto& value, const auto&... facts) {
            constexpr std::size_t width = fields::max_chars<std::remove_cvref_t<decltype(facts)>...>;
            if constexpr (width > 0)
                if (value.size() > width)
                    throw fail(std::string(what) + " " + h5::column_name(name, facts...) + " '" + value +
                               "' is longer than " + std::to_string(width) + " characters");
        }, object);
    }
    template <class Desc, class O>
    void meta_table(RowTable<Desc>& t, const std::vector<O>& rows, const char* what) {
        for (const auto& r : rows) {
            check_fits<Desc>(what, r);
            t.add(r);
        }
        t.write();
    }

    void create() {
        h5::quiet_errors();
        h5::Id fapl = h5::check(H5Pcreate(H5P_FILE_ACCESS), "fapl");
        h5::check(H5Pset_libver_bounds(fapl, H5F_LIBVER_LATEST, H5F_LIBVER_LATEST), "libver bounds");
        file = h5::Id(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl));
        if (!file.valid()) throw fail("cannot create the trace file");

        if (meta.created.empty()) meta.created = now_iso8601();
        if (meta.machine.empty()) meta.machine = host_name();
        if (meta.config_json.empty()) meta.config_json = "{}";  // still a JSON document
        write_string_attr(file, "format", s::kFormatName);
        write_meta_attrs();

        runs = make_table<s::RunTable>(s::kRuns, 64);
        meta_table(runs, meta.runs, "run");
        linears = make_table<s::LinearTable>(s::kLinears, 256);
        meta_table(linears, meta.linears, "linear");
        quantizers = make_table<s::NamesTable>(s::kQuantizers, 64);
        meta_table(quantizers, meta.quantizers, "quantizer");
        training_recipes = make_table<s::NamesTable>(s::kRecipes, 64);
        meta_table(training_recipes, meta.training_recipes, "recipe");
        ops_names = make_table<s::NamesTable>(s::kOps, 64);
        meta_table(ops_names, meta.ops, "op");
        gemms = make_table<s::NamesTable>(s::kGemmNames, 4);
        meta_table(gemms, std::vector<std::string>{"fprop", "dgrad", "wgrad"}, "gemm");
        operands_names = make_table<s::NamesTable>(s::kOperandNames, 4);
        meta_table(operands_names, std::vector<std::string>{"x", "w", "dy"}, "operand");
        event_kinds = make_table<s::NamesTable>(s::kEventKinds, 16);
        std::vector<std::string> kinds;
        for (int k = 0; k <= static_cast<int>(kLastEventKind); ++k)
            kinds.push_back(event_kind_name(static_cast<EventKind>(k)));
        meta_table(event_kinds, kinds, "event kind");
        precision = make_table<s::PrecisionTable>(s::kPrecision, 256);
        meta_table(precision, meta.precision, "precision");
        injections = make_table<s::InjectionTable>(s::kInjections, 64);
        meta_table(injections, meta.injections, "injection");

        steps = make_table<s::StepTable>(s::kSteps, 512);
        events = make_table<s::EventTable>(s::kEvents, 64);
        slots = meta.linears.size() * kOperandsPerLinear;
        hsize_t scols = slots ? slots : 1;  // a chunk needs a nonzero width
        scaling_index = make_table<s::ScalingIndexTable>(s::kScalingIndex, 512);
        scaling_amax = make_table(s::kScalingAmax, h5::Id(H5Tcopy(H5T_NATIVE_FLOAT)), 64, scols);
        scaling_scale = make_table(s::kScalingScale, h5::Id(H5Tcopy(H5T_NATIVE_FLOAT)), 64, scols);
        operands = make_table<s::OperandTable>(s::kOperands, 256);
        // The flat data behind (offset, count) spans compresses; chunk sizes measured on an
        // H200 trace (docs/trace-format.md, "Storage").
        errors = make_table<s::ErrorTable>(s::kOperandErrors, 1024, Storage::Padded);
        histogram = make_table(s::kOperandHistogram, h5::Id(H5Tcopy(H5T_NATIVE_INT64)), 8192, 0, Storage::Padded);
        channel_absmax = make_bfloat16s(s::kOperandChannelAbsmax, 16384, Storage::Padded);
        top = make_table<s::TopTable>(s::kOperandTop, 2048, Storage::Padded);
        amax_history = make_floats(s::kOperandAmaxHistory, 16384, Storage::Padded);
        blockmaps = make_table<s::BlockMapTable>(s::kBlockMaps, 256);
        block_absmax = make_bfloat16s(s::kBlockAbsmax, 16384, Storage::Padded);
        block_scale_inv = make_floats(s::kBlockScaleInv, 16384, Storage::Padded);  // the scales: exact
        block_sqnr = make_bfloat16s(s::kBlockSqnr, 16384, Storage::Padded);
        ops = make_table<s::OpTable>(s::kOpTimes, 1024, Storage::WholeChunks);
        kernel_steps = make_table<s::KernelStepTable>(s::kKernelSteps, 4096, Storage::WholeChunks);
        ranks = make_table<s::RankTable>(s::kRanks, 512);
        gemm_errors = make_table<s::GemmErrorTable>(s::kGemmErrors, 512);
        gate_up = make_table<s::GateUpAlignmentTable>(s::kGateUpAlignment, 256);

        h5::check(H5Fflush(file, H5F_SCOPE_LOCAL), "flush before SWMR");
        if (H5Fstart_swmr_write(file) < 0) throw fail("cannot switch to SWMR writing");
        ops_known = meta.ops.size();
    }

    // The root attributes: the numbers and strings of TraceMeta, in its list's order (its
    // vectors are the /meta tables). format_version is this writer's (set in the constructor).
    void write_meta_attrs() {
        visit_fields(meta, [&](std::string_view name, const auto& value, const auto&... facts) {
            using T = std::remove_cvref_t<decltype(value)>;
            const std::string attr(fields::flat_name(name, facts...));
            if constexpr (std::is_same_v<T, std::string>)
                write_string_attr(file, attr.c_str(), value);
            else if constexpr (std::is_integral_v<T>)
                write_int_attr(file, attr.c_str(), value);
        });
    }

    // ---- records to rows (writer thread) ----
    void add(const StepRecord& r) { steps.add(r); }
    void add(const EventRecord& r) { events.add(r); }  // longer details are cut (kEventDetailChars)
    void add(const ScalingRecord& r) {
        scaling_index.add(r);
        if (slots == 0) {  // keep the 1-wide placeholder column aligned with the index
            float nan = std::numeric_limits<float>::quiet_NaN();
            scaling_amax.push_row(nan);
            scaling_scale.push_row(nan);
            return;
        }
        scaling_amax.push(r.amax.data(), 1);
        scaling_scale.push(r.scale.data(), 1);
    }
    void add(const OperandRecord& r) {
        const TensorStats& st = r.stats;
        s::OperandSpans sp;
        // Only the span of nonzero bins is stored.
        const auto& bins = st.histogram.bins;
        int lo = 0, hi = -1;
        for (int i = 0; i < kHistBins; ++i)
            if (bins[i] != 0) {
                if (hi < 0) lo = i;
                hi = i;
            }
        sp.hist_min_exp = hi < 0 ? 0 : lo + kHistMinExp;
        sp.hist_offset = histogram.total();
        sp.hist_count = hi < 0 ? 0 : static_cast<std::uint64_t>(hi - lo + 1);
        if (sp.hist_count) histogram.push(&bins[lo], sp.hist_count);
        sp.errors_offset = errors.total();
        sp.errors_count = r.errors.size();
        for (std::size_t i = 0; i < r.errors.size(); ++i) errors.add(static_cast<std::int32_t>(i), r.errors[i]);
        sp.channel_offset = channel_absmax.total();
        sp.channel_count = st.outliers.channel_absmax.size();
        channel_absmax.push_floats(st.outliers.channel_absmax.data(), sp.channel_count);
        sp.top_offset = top.total();
        sp.top_count = st.outliers.top.size();
        for (const auto& t : st.outliers.top) top.add(t);
        sp.history_offset = amax_history.total();
        sp.history_count = r.amax_history.size();
        amax_history.push(r.amax_history.data(), sp.history_count);
        operands.add(r, sp);
    }
    void add(const BlockMapRecord& r) {
        s::BlockMapSpan span{block_absmax.total(), r.absmax.size()};
        block_absmax.push_floats(r.absmax.data(), span.count);
        block_scale_inv.push(r.scale_inv.data(), span.count);
        block_sqnr.push_floats(r.sqnr_db.data(), span.count);
        blockmaps.add(r, span);
    }
    void add(const OpRecord& r) { ops.add(r); }
    void add(const KernelStepRecord& r) { kernel_steps.add(r); }
    void add(const OpNameRecord& r) { ops_names.add(r.name); }
    void add(const RankStepRecord& r) { ranks.add(r); }
    void add(const GemmErrorRecord& r) { gemm_errors.add(r); }
    void add(const GateUpAlignmentRecord& r) { gate_up.add(r); }

    // Every dataset closed before the file, so the file really closes (and its SWMR mark
    // is cleared) now rather than when the last id goes.
    void close_file() {
        Table* tables[] = {&runs, &linears, &quantizers, &training_recipes, &ops_names, &gemms, &operands_names,
                           &event_kinds, &steps, &events, &scaling_index, &scaling_amax, &scaling_scale, &operands,
                           &errors, &histogram, &channel_absmax, &top, &amax_history, &blockmaps, &block_absmax,
                           &block_scale_inv, &block_sqnr, &ops, &kernel_steps, &ranks, &gemm_errors, &gate_up,
                           &precision, &injections};
        for (Table* t : tables) t->dset.reset();
        file.reset();
    }

    std::size_t pending_bytes() const {
        std::size_t n = 0;
        for (const Table* t : all_tables()) n += t->pending.size();
        return n;
    }
    std::vector<const Table*> all_tables() const {
        return {&ops_names, &steps, &events, &scaling_index, &scaling_amax, &scaling_scale, &operands, &errors,
                &histogram, &channel_absmax, &top, &amax_history, &blockmaps, &block_absmax, &block_scale_inv,
                &block_sqnr, &ops, &kernel_steps, &ranks, &gemm_errors, &gate_up};
    }

    // Data first, then the rows that point into it, each flushed before the next group.
    // `everything`: also the partial last chunks that wait for kTailInterval.
    void flush_file(bool everything) {
        Table* data[] = {&histogram, &channel_absmax, &top, &amax_history, &errors, &block_absmax,
                         &block_scale_inv, &block_sqnr, &scaling_amax, &scaling_scale, &ops_names};
        Table* owners[] = {&operands, &blockmaps, &scaling_index, &steps, &events, &ops, &kernel_steps, &ranks,
                           &gemm_errors, &gate_up};
        for (Table* t : data) {
            bool had = t->pending_rows() > 0;
            t->write();
            if (had) t->flush();
        }
        const auto now = std::chrono::steady_clock::now();
        for (Table* t : owners) {
            const bool tail = everything || t->storage != Storage::WholeChunks || now - t->tail_at >= kTailInterval;
            const hsize_t had = t->rows;
            t->write(tail);
            if (t->rows == had) continue;
            if (t->rows % t->chunk_rows) t->tail_at = now;
            t->flush();
        }
        h5::check(H5Fflush(file, H5F_SCOPE_LOCAL), "flushing the file");
    }

    // After a failed write the file must not change again: closing it would write metadata
    // that points at data which never reached the disk, and the whole file would be lost.
    // HDF5's descriptor is swapped for a read-only one, so its later writes fail and the
    // file keeps what the last successful flush wrote.
    void freeze_file() {
        void* handle = nullptr;
        if (!file.valid() || H5Fget_vfd_handle(file, H5P_DEFAULT, &handle) < 0 || !handle) return;
        const int read_only = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
        if (read_only < 0) return;
        ::dup2(read_only, *static_cast<int*>(handle));
        ::close(read_only);
    }

    std::size_t wake_at() const { return std::max<std::size_t>(1, options.queue_capacity / 2); }

    void run() {
        h5::quiet_errors();  // HDF5's error printing is per thread: the caller's setting is not ours
        auto next_flush = std::chrono::steady_clock::now() + options.flush_interval;
        std::deque<Record> batch;
        try {
            for (;;) {
                std::uint64_t flush_target = 0;
                bool stop = false;
                {
                    std::unique_lock lock(mu);
                    // Records wait for the flush: waking per record would cost the training
                    // threads a context switch per op timing.
                    wake.wait_until(lock, next_flush, [&] {
                        return queue.size() >= wake_at() || closing || flush_requested > flush_done;
                    });
                    batch.swap(queue);
                    flush_target = flush_requested;
                    stop = closing;
                }
                space.notify_all();
                for (auto& r : batch) std::visit([&](const auto& rec) { add(rec); }, r);
                batch.clear();
                auto now = std::chrono::steady_clock::now();
                bool due = now >= next_flush || stop || flush_target > flush_done ||
                           pending_bytes() > kEarlyFlushBytes;
                if (due) {
                    flush_file(stop || flush_target > flush_done);  // flush() and close(): every row
                    next_flush = std::chrono::steady_clock::now() + options.flush_interval;
                    std::lock_guard lock(mu);
                    flush_done = flush_target;
                    ++flush_count;
                    flushed_cv.notify_all();
                }
                if (stop) {
                    std::lock_guard lock(mu);
                    if (queue.empty()) break;
                }
            }
        } catch (const std::exception& e) {
            freeze_file();
            std::lock_guard lock(mu);
            error = e.what();
        }
        std::lock_guard lock(mu);
        closed = true;
        space.notify_all();
        flushed_cv.notify_all();
    }
};

TraceWriter::TraceWriter(const std::string& path, const TraceMeta& meta, TraceWriterOptions options)
    : impl_(std::make_unique<Impl>()) {
    impl_->path = path;
    impl_->meta = meta;
    impl_->meta.format_version = kFormatVersion;
    impl_->options = options;
    if (impl_->options.queue_capacity == 0) impl_->options.queue_capacity = 1;
    if (auto why = check_meta(meta); !why.empty()) throw TraceError(path, why);
    try {
        impl_->create();
    } catch (const h5::Error& e) {
        throw TraceError(path, e.what());
    }
    impl_->thread = std::thread([this] { impl_->run(); });
}

TraceWriter::~TraceWriter() {
    try {
        close();
    } catch (...) {
    }
}

void TraceWriter::write(Record record) {
    Impl& d = *impl_;
    std::unique_lock lock(d.mu);
    if (!d.error.empty()) throw d.fail("writer failed: " + d.error);
    if (d.closing || d.closed) throw d.fail("write after close");
    if (auto e = check_record(d.meta, d.ops_known, record); !e.empty()) throw std::invalid_argument(e);
    d.space.wait(lock, [&] { return d.queue.size() < d.options.queue_capacity || d.closed; });
    if (d.closed) throw d.fail("writer failed: " + d.error);
    if (std::holds_alternative<OpNameRecord>(record)) ++d.ops_known;
    d.queue.push_back(std::move(record));
    if (d.queue.size() == d.wake_at()) d.wake.notify_one();  // half full: drain before writers block
}

void TraceWriter::flush() {
    Impl& d = *impl_;
    std::unique_lock lock(d.mu);
    if (d.closed) {
        if (!d.error.empty()) throw d.fail("writer failed: " + d.error);
        return;
    }
    std::uint64_t target = ++d.flush_requested;
    d.wake.notify_one();
    d.flushed_cv.wait(lock, [&] { return d.flush_done >= target || d.closed; });
    if (!d.error.empty()) throw d.fail("writer failed: " + d.error);
}

void TraceWriter::close() {
    Impl& d = *impl_;
    {
        std::lock_guard lock(d.mu);
        d.closing = true;
    }
    d.wake.notify_one();
    if (d.thread.joinable()) d.thread.join();
    d.close_file();
    std::lock_guard lock(d.mu);
    if (!d.error.empty()) {
        std::string e = std::move(d.error);
        d.error.clear();
        throw d.fail("writer failed: " + e);
    }
}

const std::string& TraceWriter::path() const { return impl_->path; }
const TraceMeta& TraceWriter::meta() const { return impl_->meta; }
std::uint64_t TraceWriter::flushes() const {
    std::lock_guard lock(impl_->mu);
    return impl_->flush_count;
}

}  // namespace fp8scope::trace
