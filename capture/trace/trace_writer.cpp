// The SWMR trace writer. The writer thread owns every HDF5 call after construction.
// Rows are buffered per table and written at each flush, flat datasets (histograms,
// channel absmax, maps, ...) before the tables whose (offset, count) columns point into
// them, each flushed in that order: a reader, or a file left by a killed run, never holds
// a row that points past the end of its data.
#include "trace_writer.h"

#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <ctime>
#include <deque>
#include <limits>
#include <mutex>
#include <thread>

#include "h5.h"
#include "trace_schema.h"

namespace fp8scope::trace {
namespace s = schema;

namespace {

constexpr std::size_t kEarlyFlushBytes = 16u << 20;  // flush before buffers grow past this

// One appendable dataset: 1-D rows of a compound/atomic type, or 2-D with `cols` fixed.
struct Table {
    const char* path = nullptr;
    h5::Id dset, memtype;
    std::size_t row_bytes = 0;
    hsize_t cols = 0;  // 0: 1-D
    hsize_t rows = 0;  // in the file
    std::vector<unsigned char> pending;

    hsize_t pending_rows() const { return pending.size() / row_bytes; }
    hsize_t total() const { return rows + pending_rows(); }
    void push(const void* p, hsize_t n) {
        auto* b = static_cast<const unsigned char*>(p);
        pending.insert(pending.end(), b, b + n * row_bytes);
    }
    template <class T>
    void push_row(const T& row) { push(&row, 1); }

    void write() {
        hsize_t n = pending_rows();
        if (n == 0) return;
        hsize_t dims[2] = {rows + n, cols};
        h5::check(H5Dset_extent(dset, dims), std::string("extending ") + path);
        h5::Id space = h5::check(H5Dget_space(dset), path);
        hsize_t start[2] = {rows, 0}, count[2] = {n, cols};
        h5::check(H5Sselect_hyperslab(space, H5S_SELECT_SET, start, nullptr, count, nullptr), path);
        h5::Id mem = h5::check(H5Screate_simple(cols ? 2 : 1, count, nullptr), path);
        h5::check(H5Dwrite(dset, memtype, mem, space, H5P_DEFAULT, pending.data()), std::string("writing ") + path);
        rows += n;
        pending.clear();
    }
    void flush() { h5::check(H5Dflush(dset), std::string("flushing ") + path); }
};

std::string now_iso8601() {
    std::time_t t = std::time(nullptr);
    std::tm tm{};
    gmtime_r(&t, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return buf;
}

std::string host_name() {
    char buf[256] = {};
    if (gethostname(buf, sizeof buf - 1) != 0) return "unknown";
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

    Table runs, linears, recipes, training_recipes, ops_names, gemms, operands_names, event_kinds;
    Table steps, events, scaling_index, scaling_amax, scaling_scale;
    Table operands, errors, histogram, channel_absmax, top, amax_history;
    Table blockmaps, block_absmax, block_scale_inv, block_sqnr;
    Table ops;
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

    Table make_table(const char* p, h5::Id memtype, hsize_t chunk_rows, hsize_t cols = 0) {
        Table t;
        t.path = p;
        t.row_bytes = H5Tget_size(memtype) * (cols ? cols : 1);
        t.cols = cols;
        h5::Id filetype = H5Tget_class(memtype) == H5T_COMPOUND ? s::packed(memtype)
                          : H5Tequal(memtype, H5T_NATIVE_FLOAT) > 0 ? h5::Id(H5Tcopy(H5T_IEEE_F32LE))
                                                                    : h5::Id(H5Tcopy(H5T_STD_I64LE));
        hsize_t dims[2] = {0, cols}, maxdims[2] = {H5S_UNLIMITED, cols}, chunk[2] = {chunk_rows, cols};
        int rank = cols ? 2 : 1;
        h5::Id space = h5::check(H5Screate_simple(rank, dims, maxdims), p);
        h5::Id dcpl = h5::check(H5Pcreate(H5P_DATASET_CREATE), p);
        h5::check(H5Pset_chunk(dcpl, rank, chunk), p);
        h5::Id lcpl = h5::check(H5Pcreate(H5P_LINK_CREATE), p);
        h5::check(H5Pset_create_intermediate_group(lcpl, 1), p);
        t.dset = h5::check(H5Dcreate2(file, p, filetype, space, lcpl, dcpl, H5P_DEFAULT),
                           std::string("creating ") + p);
        t.memtype = std::move(memtype);
        return t;
    }

    void name_table(Table& t, const std::vector<std::string>& names, const char* what) {
        for (const auto& n : names) {
            s::NameRow row{};
            if (!s::put_name(row.name, n))
                throw fail(std::string(what) + " name '" + n + "' is longer than " +
                           std::to_string(s::kNameChars) + " characters");
            t.push_row(row);
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
        write_string_attr(file, "format", s::kFormatName);
        write_int_attr(file, "format_version", kFormatVersion);
        write_string_attr(file, "tool_version", meta.tool_version);
        write_string_attr(file, "created", meta.created);
        write_string_attr(file, "machine", meta.machine);
        write_string_attr(file, "config", meta.config_json.empty() ? "{}" : meta.config_json);
        write_int_attr(file, "capture_every", meta.capture_every);
        write_int_attr(file, "blockmap_every", meta.blockmap_every);

        runs = make_table(s::kRuns, s::run_type(), 64);
        for (const auto& r : meta.runs) {
            s::RunRow row{};
            if (!s::put_name(row.name, r.name))
                throw fail("run name '" + r.name + "' is longer than " + std::to_string(s::kRunNameChars) +
                           " characters");
            if (!s::put_name(row.recipe, r.recipe))
                throw fail("run recipe '" + r.recipe + "' is too long");
            runs.push_row(row);
        }
        runs.write();
        linears = make_table(s::kLinears, s::linear_type(), 256);
        for (const auto& l : meta.linears) {
            s::LinearRow row{};
            if (!s::put_name(row.name, l.name)) throw fail("linear name '" + l.name + "' is too long");
            row.layer = l.layer;
            row.in_features = l.in_features;
            row.out_features = l.out_features;
            linears.push_row(row);
        }
        linears.write();
        recipes = make_table(s::kRecipes, s::name_type(), 64);
        name_table(recipes, meta.recipes, "recipe");
        training_recipes = make_table(s::kTrainingRecipes, s::name_type(), 64);
        name_table(training_recipes, meta.training_recipes, "training recipe");
        ops_names = make_table(s::kOps, s::name_type(), 64);
        name_table(ops_names, meta.ops, "op");
        gemms = make_table(s::kGemmNames, s::name_type(), 4);
        name_table(gemms, {"fprop", "dgrad", "wgrad"}, "gemm");
        operands_names = make_table(s::kOperandNames, s::name_type(), 4);
        name_table(operands_names, {"x", "w", "dy"}, "operand");
        event_kinds = make_table(s::kEventKinds, s::name_type(), 16);
        std::vector<std::string> kinds;
        for (int k = 0; k <= static_cast<int>(EventKind::Error); ++k)
            kinds.push_back(event_kind_name(static_cast<EventKind>(k)));
        name_table(event_kinds, kinds, "event kind");

        steps = make_table(s::kSteps, s::step_type(), 512);
        events = make_table(s::kEvents, s::event_type(), 64);
        slots = meta.linears.size() * kOperandsPerLinear;
        hsize_t scols = slots ? slots : 1;  // a chunk needs a nonzero width
        scaling_index = make_table(s::kScalingIndex, s::scaling_index_type(), 512);
        scaling_amax = make_table(s::kScalingAmax, h5::Id(H5Tcopy(H5T_NATIVE_FLOAT)), 64, scols);
        scaling_scale = make_table(s::kScalingScale, h5::Id(H5Tcopy(H5T_NATIVE_FLOAT)), 64, scols);
        operands = make_table(s::kOperands, s::operand_type(), 256);
        errors = make_table(s::kOperandErrors, s::error_type(), 1024);
        histogram = make_table(s::kOperandHistogram, h5::Id(H5Tcopy(H5T_NATIVE_INT64)), 8192);
        channel_absmax = make_table(s::kOperandChannelAbsmax, h5::Id(H5Tcopy(H5T_NATIVE_FLOAT)), 16384);
        top = make_table(s::kOperandTop, s::top_type(), 2048);
        amax_history = make_table(s::kOperandAmaxHistory, h5::Id(H5Tcopy(H5T_NATIVE_FLOAT)), 16384);
        blockmaps = make_table(s::kBlockMaps, s::blockmap_type(), 256);
        block_absmax = make_table(s::kBlockAbsmax, h5::Id(H5Tcopy(H5T_NATIVE_FLOAT)), 16384);
        block_scale_inv = make_table(s::kBlockScaleInv, h5::Id(H5Tcopy(H5T_NATIVE_FLOAT)), 16384);
        block_sqnr = make_table(s::kBlockSqnr, h5::Id(H5Tcopy(H5T_NATIVE_FLOAT)), 16384);
        ops = make_table(s::kOpTimes, s::op_type(), 4096);

        h5::check(H5Fflush(file, H5F_SCOPE_LOCAL), "flush before SWMR");
        if (H5Fstart_swmr_write(file) < 0) throw fail("cannot switch to SWMR writing");
        ops_known = meta.ops.size();
    }

    // ---- records to rows (writer thread) ----
    void add(const StepRecord& r) {
        s::StepRow row{r.run, r.step, r.loss, r.eval_loss, r.lr, r.grad_norm, r.step_time_s, r.tokens_per_s, r.recipe};
        steps.push_row(row);
    }
    void add(const EventRecord& r) {
        s::EventRow row{};
        row.run = r.run;
        row.step = r.step;
        row.kind = static_cast<std::int32_t>(r.kind);
        s::put_name(row.detail, r.detail);  // longer details are cut (kEventDetailChars)
        events.push_row(row);
    }
    void add(const ScalingRecord& r) {
        scaling_index.push_row(s::ScalingIndexRow{r.run, r.step});
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
        s::OperandRow row{};
        s::put_key(row, r.key);
        row.recipe_in_use = r.recipe_in_use;
        row.scale = r.scale;
        row.numel = st.numel;
        row.finite = st.finite;
        row.nan = st.nan;
        row.inf = st.inf;
        row.zero = st.zero;
        row.amax = st.amax;
        row.min_nonzero_abs = st.min_nonzero_abs;
        row.mean = st.mean;
        row.rms = st.rms;
        row.stddev = st.stddev;
        row.dynamic_range = st.dynamic_range;
        row.kurtosis = st.outliers.kurtosis;
        row.outlier_k = st.outliers.k;
        row.frac_beyond_k_rms = st.outliers.frac_beyond_k_rms;
        row.hist_zero = st.histogram.zero;
        row.hist_nan = st.histogram.nan;
        row.hist_inf = st.histogram.inf;
        // Only the span of nonzero bins is stored.
        const auto& bins = st.histogram.bins;
        int lo = 0, hi = -1;
        for (int i = 0; i < kHistBins; ++i)
            if (bins[i] != 0) {
                if (hi < 0) lo = i;
                hi = i;
            }
        row.hist_min_exp = hi < 0 ? 0 : lo + kHistMinExp;
        row.hist_offset = histogram.total();
        row.hist_count = hi < 0 ? 0 : static_cast<std::uint64_t>(hi - lo + 1);
        if (row.hist_count) histogram.push(&bins[lo], row.hist_count);
        row.errors_offset = errors.total();
        row.errors_count = r.errors.size();
        for (std::size_t i = 0; i < r.errors.size(); ++i) {
            const ErrorStats& e = r.errors[i];
            errors.push_row(s::ErrorRow{static_cast<std::int32_t>(i), e.amax, e.mse, e.sqnr_db, e.rel_l2,
                                        e.max_abs_err, e.cosine, e.underflow_pct, e.overflow_pct,
                                        e.scale_inv_min, e.scale_inv_max, e.nonfinite_out});
        }
        row.channel_offset = channel_absmax.total();
        row.channel_count = st.outliers.channel_absmax.size();
        channel_absmax.push(st.outliers.channel_absmax.data(), row.channel_count);
        row.top_offset = top.total();
        row.top_count = st.outliers.top.size();
        for (const auto& t : st.outliers.top) top.push_row(s::TopRow{t.value, t.row, t.col});
        row.history_offset = amax_history.total();
        row.history_count = r.amax_history.size();
        amax_history.push(r.amax_history.data(), row.history_count);
        operands.push_row(row);
    }
    void add(const BlockMapRecord& r) {
        s::BlockMapRow row{};
        s::put_key(row, r.key);
        row.recipe = r.recipe;
        row.rows = r.rows;
        row.cols = r.cols;
        row.tile_rows = r.tile_rows;
        row.tile_cols = r.tile_cols;
        row.grid_rows = r.grid_rows;
        row.grid_cols = r.grid_cols;
        row.offset = block_absmax.total();
        row.count = r.absmax.size();
        block_absmax.push(r.absmax.data(), row.count);
        block_scale_inv.push(r.scale_inv.data(), row.count);
        block_sqnr.push(r.sqnr_db.data(), row.count);
        blockmaps.push_row(row);
    }
    void add(const OpRecord& r) {
        ops.push_row(s::OpRow{r.run, r.step, r.op, r.linear, r.layer, r.device, r.stream, r.start_ns, r.end_ns});
    }
    void add(const OpNameRecord& r) {
        s::NameRow row{};
        s::put_name(row.name, r.name);
        ops_names.push_row(row);
    }

    // Every dataset closed before the file, so the file really closes (and its SWMR mark
    // is cleared) now rather than when the last id goes.
    void close_file() {
        for (Table* t : {&runs, &linears, &recipes, &training_recipes, &ops_names, &gemms, &operands_names,
                         &event_kinds, &steps, &events, &scaling_index, &scaling_amax, &scaling_scale, &operands,
                         &errors, &histogram, &channel_absmax, &top, &amax_history, &blockmaps, &block_absmax,
                         &block_scale_inv, &block_sqnr, &ops})
            t->dset.reset();
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
                &block_sqnr, &ops};
    }

    // Data first, then the rows that point into it, each flushed before the next group.
    void flush_file() {
        Table* data[] = {&histogram, &channel_absmax, &top, &amax_history, &errors, &block_absmax,
                         &block_scale_inv, &block_sqnr, &scaling_amax, &scaling_scale, &ops_names};
        Table* owners[] = {&operands, &blockmaps, &scaling_index, &steps, &events, &ops};
        for (Table* t : data) {
            bool had = t->pending_rows() > 0;
            t->write();
            if (had) t->flush();
        }
        for (Table* t : owners) {
            bool had = t->pending_rows() > 0;
            t->write();
            if (had) t->flush();
        }
        h5::check(H5Fflush(file, H5F_SCOPE_LOCAL), "flushing the file");
    }

    std::size_t wake_at() const { return std::max<std::size_t>(1, options.queue_capacity / 2); }

    void run() {
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
                    flush_file();
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
