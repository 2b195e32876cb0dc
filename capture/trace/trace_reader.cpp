// The trace reader: opens a trace (reader_file.h), indexes its tables by (run, step) once,
// then incrementally on refresh() (reader_index.h), and answers queries by decoding the
// rows they ask for (reader_decode.h). Every id, offset and count read from the file is
// checked before it is used: a damaged file raises TraceError, never reads out of bounds.
#include "trace_reader.h"

#include <algorithm>
#include <map>
#include <utility>

#include "kernel_steps.h"
#include "reader_decode.h"
#include "reader_file.h"
#include "reader_index.h"
#include "reader_overview.h"

namespace fp8scope::trace {
namespace s = schema;

struct TraceReader::Impl {
    TraceFile file;
    TraceMeta meta;
    TraceIndex index;
    std::unique_ptr<StepOverview> overview;  // set when opened as an overview
    std::unique_ptr<ScalingOverview> scaling_overview;  // with it
    std::unique_ptr<KernelStepOverview> kernel_overview;  // with it
    std::unique_ptr<RankOverview> rank_overview;          // with it
    std::unique_ptr<OpOverview> op_overview;              // with it
    std::int64_t detail_from = INT64_MIN;
    std::size_t buckets = StepDecimator::kDefaultBuckets;

    RecordDecoder decoder() const { return {file, meta}; }
    // An overview's pass over /steps, done when first needed and then for what was added.
    const StepOverview& scanned() const {
        if (overview->scanned < file.steps.rows) overview->scan(file, meta, buckets);
        return *overview;
    }
    const KernelStepOverview& scanned_kernels() const {
        if (kernel_overview->scanned < file.kernel_steps.rows || kernel_overview->runs.empty())
            kernel_overview->scan(file, meta, buckets);
        return *kernel_overview;
    }
    const RankOverview& scanned_ranks() const {
        if (rank_overview->scanned < file.ranks.rows || rank_overview->ranks.empty()) rank_overview->scan(file, meta, buckets);
        return *rank_overview;
    }
    const OpOverview& scanned_ops() const {
        if (op_overview->scanned < file.ops.rows) op_overview->scan(file, meta);
        return *op_overview;
    }
    const ScalingOverview& scanned_scaling() const {
        if (scaling_overview->scanned < file.scaling_index.rows || scaling_overview->runs.empty())
            scaling_overview->scan(file, meta);
        return *scaling_overview;
    }
};

TraceReader::TraceReader(const std::string& path, const LargeTraceOptions& large) : impl_(std::make_unique<Impl>()) {
    Impl& d = *impl_;
    d.file.path = path;
    d.buckets = large.buckets;
    try {
        d.file.open(d.meta);
        d.index.op_rows.resize(d.meta.runs.size());
        if (large.min_step_rows > 0 && d.file.steps.rows >= large.min_step_rows) {
            d.overview = std::make_unique<StepOverview>();
            d.scaling_overview = std::make_unique<ScalingOverview>();
            d.kernel_overview = std::make_unique<KernelStepOverview>();
            d.rank_overview = std::make_unique<RankOverview>();
            d.op_overview = std::make_unique<OpOverview>();
            const std::int64_t newest = newest_step(d.file, d.meta);  // where the runs are now
            const std::int64_t tail = std::max<std::int64_t>(large.tail_steps, 1);
            d.detail_from = newest > INT64_MIN + tail ? newest - tail + 1 : INT64_MIN;
            d.index.start_at(d.file, d.detail_from);
        }
        d.index.update(d.file, d.meta);
    } catch (const h5::Error& e) {
        throw TraceError(path, e.what());
    }
}
TraceReader::~TraceReader() = default;
TraceReader::TraceReader(TraceReader&&) noexcept = default;
TraceReader& TraceReader::operator=(TraceReader&&) noexcept = default;

const std::string& TraceReader::path() const { return impl_->file.path; }
const TraceMeta& TraceReader::meta() const { return impl_->meta; }
bool TraceReader::refresh() {
    impl_->file.refresh();
    return impl_->index.update(impl_->file, impl_->meta);
}

bool TraceReader::overview() const { return impl_->overview != nullptr; }
std::int64_t TraceReader::detail_from() const { return impl_->detail_from; }

std::vector<StepRecord> TraceReader::step_overview(int run) const {
    const Impl& d = *impl_;
    if (run < 0 || run >= static_cast<int>(d.meta.runs.size())) return {};
    if (d.overview) return d.scanned().runs[run].rows();
    StepDecimator decimator(d.buckets);
    for (const auto& s : d.index.step_records)
        if (s.run == run) decimator.add(s);
    return decimator.rows();
}

std::vector<StepRecord> TraceReader::steps(int run, std::int64_t from, std::int64_t to) const {
    const Impl& d = *impl_;
    if (d.overview) return d.scanned().read(d.file, d.meta, run, from, to);
    std::vector<StepRecord> out = standing_records(steps(run));
    std::erase_if(out, [&](const StepRecord& r) { return r.step < from || r.step > to; });
    return out;
}

std::vector<std::vector<SlotPoint>> TraceReader::scaling_overview(int run) const {
    const Impl& d = *impl_;
    if (run < 0 || run >= static_cast<int>(d.meta.runs.size())) return {};
    if (!d.scaling_overview) return scaling_overview(run, INT64_MIN, INT64_MAX);
    std::vector<std::vector<SlotPoint>> out;
    for (std::size_t slot = 0; slot < d.file.slots; ++slot) out.push_back(d.scanned_scaling().runs[run].rows(slot));
    return out;
}

std::vector<std::vector<SlotPoint>> TraceReader::scaling_overview(int run, std::int64_t from, std::int64_t to) const {
    const Impl& d = *impl_;
    std::vector<std::vector<SlotPoint>> out;
    if (run < 0 || run >= static_cast<int>(d.meta.runs.size())) return out;
    SlotDecimator decimator(ScalingOverview::kBuckets, d.file.slots);
    std::vector<SlotPoint> points(d.file.slots);
    for (const ScalingRecord& r : scaling_detail(run, from, to)) {
        for (std::size_t k = 0; k < points.size(); ++k) points[k] = {r.step, r.amax[k], r.scale[k]};
        decimator.add(points);
    }
    for (std::size_t slot = 0; slot < d.file.slots; ++slot) out.push_back(decimator.rows(slot));
    return out;
}

std::vector<ScalingRecord> TraceReader::scaling_detail(int run, std::int64_t from, std::int64_t to) const {
    const Impl& d = *impl_;
    if (d.scaling_overview) return d.scanned_scaling().read(d.file, d.meta, run, from, to);
    return scaling(run, from, to);
}

std::vector<KernelStepRecord> TraceReader::kernel_step_overview(int run) const {
    const Impl& d = *impl_;
    if (run < 0 || run >= static_cast<int>(d.meta.runs.size())) return {};
    if (d.kernel_overview) return d.scanned_kernels().decimated(run);
    KernelStepOverview one;  // the same decimation of the indexed sums
    one.runs.assign(1, KernelSumDecimator(d.buckets));
    one.open.resize(1);
    for (const KernelStepRecord& r : kernel_steps(run, INT64_MIN, INT64_MAX)) {
        KernelStepSums& sums = one.open[0];
        if (!sums.rows.empty() && !sums.continues(r)) one.runs[0].add(std::exchange(sums, {}));
        sums.add(r);
    }
    return one.decimated(0);
}

std::vector<KernelStepRecord> TraceReader::kernel_steps_detail(int run, std::int64_t from, std::int64_t to) const {
    const Impl& d = *impl_;
    if (d.kernel_overview) return d.scanned_kernels().read(d.file, d.meta, run, from, to);
    return kernel_steps(run, from, to);
}

std::vector<OpRecord> TraceReader::ops_detail(int run, std::int64_t from, std::int64_t to) const {
    const Impl& d = *impl_;
    if (!d.op_overview || from >= d.detail_from) return ops(run, from, to);
    return d.scanned_ops().read(d.file, d.meta, run, from, to);
}

std::vector<std::int64_t> TraceReader::kernel_record_steps(int run) const {
    const Impl& d = *impl_;
    std::vector<std::int64_t> out;
    if (run < 0 || run >= static_cast<int>(d.meta.runs.size())) return out;
    if (d.file.format_version < 6) {
        for (const OpRecord& r : ops(run, INT64_MIN, INT64_MAX))
            if (r.device >= 0 && (out.empty() || out.back() != r.step)) out.push_back(r.step);
        return out;
    }
    if (d.kernel_overview) return d.scanned_kernels().detailed[run];
    for (const KernelStepRecord& k : kernel_steps(run, INT64_MIN, INT64_MAX))
        if (k.detailed && (out.empty() || out.back() != k.step)) out.push_back(k.step);
    return out;
}

std::vector<RankStepRecord> TraceReader::rank_overview() const {
    const Impl& d = *impl_;
    std::vector<RankStepRecord> out;
    if (d.rank_overview) {
        for (const RankDecimator& r : d.scanned_ranks().ranks)
            for (const auto& k : r.rows()) out.push_back(k);
        return out;
    }
    std::vector<RankDecimator> ranks(static_cast<std::size_t>(std::max(d.meta.world_size, 1)), RankDecimator(d.buckets));
    for (const auto& k : d.index.rank_records) ranks[static_cast<std::size_t>(k.rank)].add(k);
    for (const RankDecimator& r : ranks)
        for (const auto& k : r.rows()) out.push_back(k);
    return out;
}

std::vector<RankStepRecord> TraceReader::rank_steps_detail(std::int64_t from, std::int64_t to) const {
    const Impl& d = *impl_;
    std::vector<RankStepRecord> out;
    for (int rank = 0; rank < d.meta.world_size; ++rank) {
        std::vector<RankStepRecord> mine;
        if (d.rank_overview) {
            mine = d.scanned_ranks().read(d.file, d.meta, rank, from, to);
        } else {
            for (const auto& k : d.index.rank_records)
                if (k.rank == rank) mine.push_back(k);
            mine = standing_records(std::move(mine));
            std::erase_if(mine, [&](const RankStepRecord& k) { return k.step < from || k.step > to; });
        }
        out.insert(out.end(), mine.begin(), mine.end());
    }
    return out;
}

std::vector<StepRecord> TraceReader::steps(int run) const {
    std::vector<StepRecord> out;
    for (const auto& s : impl_->index.step_records)
        if (s.run == run) out.push_back(s);
    return out;
}

std::int64_t TraceReader::last_step(int run) const {
    std::int64_t last = -1;
    for (const auto& s : impl_->index.step_records)
        if (s.run == run) last = std::max(last, s.step);
    return last;
}

std::vector<EventRecord> TraceReader::events() const { return impl_->index.event_records; }

std::vector<RankStepRecord> TraceReader::rank_steps() const { return impl_->index.rank_records; }

std::vector<GemmErrorRecord> TraceReader::gemm_errors(int run) const {
    std::vector<GemmErrorRecord> out;
    for (const auto& g : impl_->index.gemm_error_records)
        if (g.run == run) out.push_back(g);
    return out;
}

std::vector<GateUpAlignmentRecord> TraceReader::gate_up_alignment(int run) const {
    std::vector<GateUpAlignmentRecord> out;
    for (const auto& a : impl_->index.gate_up_records)
        if (a.run == run) out.push_back(a);
    return out;
}

std::vector<ScalingRecord> TraceReader::scaling(int run, std::int64_t from, std::int64_t to) const {
    const Impl& d = *impl_;
    std::vector<ScalingRecord> out;
    auto it = d.index.scaling_rows.lower_bound({run, from});
    for (; it != d.index.scaling_rows.end() && it->first.first == run && it->first.second <= to; ++it) {
        ScalingRecord r;
        r.run = run;
        r.step = it->first.second;
        std::vector<float> amax(d.file.scaling_amax.cols), scale(d.file.scaling_amax.cols);
        d.file.read_rows(d.file.scaling_amax, it->second, 1, amax.data());
        d.file.read_rows(d.file.scaling_scale, it->second, 1, scale.data());
        amax.resize(d.file.slots);
        scale.resize(d.file.slots);
        r.amax = std::move(amax);
        r.scale = std::move(scale);
        out.push_back(std::move(r));
    }
    return out;
}

std::vector<std::int64_t> TraceReader::row_steps(int run, std::int64_t from, std::int64_t to) const {
    const Impl& d = *impl_;
    std::vector<std::int64_t> out;
    for (auto it = d.index.scaling_rows.lower_bound({run, from});
         it != d.index.scaling_rows.end() && it->first.first == run && it->first.second <= to; ++it)
        out.push_back(it->first.second);
    if (run >= 0 && run < static_cast<int>(d.index.op_rows.size())) {
        const auto& v = d.index.op_rows[run];
        auto lo = std::lower_bound(v.begin(), v.end(), from, [](const auto& a, std::int64_t s) { return a.step < s; });
        for (auto it = lo; it != v.end() && it->step <= to; ++it) out.push_back(it->step);
    }
    if (run >= 0 && run < static_cast<int>(d.index.kernel_step_rows.size())) {
        const auto& v = d.index.kernel_step_rows[run];
        auto lo = std::lower_bound(v.begin(), v.end(), from, [](const auto& a, std::int64_t s) { return a.step < s; });
        for (auto it = lo; it != v.end() && it->step <= to; ++it) out.push_back(it->step);
    }
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
}

std::vector<std::int64_t> TraceReader::capture_steps(int run) const {
    std::vector<std::int64_t> out;
    for (auto it = impl_->index.operand_rows.lower_bound({run, INT64_MIN});
         it != impl_->index.operand_rows.end() && it->first.first == run; ++it)
        out.push_back(it->first.second);
    return out;
}

std::optional<OperandRecord> TraceReader::operand(const OperandKey& key) const {
    const Impl& d = *impl_;
    auto it = d.index.operand_rows.find({key.run, key.step});
    if (it == d.index.operand_rows.end()) return std::nullopt;
    int slot = operand_slot(key.linear, key.gemm, key.operand);
    if (slot < 0) return std::nullopt;
    const auto rows = d.file.read_table_at(d.file.operands, it->second);
    const std::size_t n = d.file.operands.layout.size;
    // The last row wins: a step recorded again after a rewind replaces the first.
    for (std::size_t i = it->second.size(); i-- > 0;) {
        const OperandKey k = TraceFile::key_at(rows.data() + i * n);
        if (k.linear == key.linear && k.gemm == key.gemm && k.operand == key.operand)
            return d.decoder().decode_operand(rows.data() + i * n, it->second[i]);
    }
    return std::nullopt;
}

std::vector<OperandRecord> TraceReader::operands(int run, std::int64_t step) const {
    const Impl& d = *impl_;
    std::vector<OperandRecord> out;
    auto it = d.index.operand_rows.find({run, step});
    if (it == d.index.operand_rows.end()) return out;
    const auto rows = d.file.read_table_at(d.file.operands, it->second);
    const std::size_t n = d.file.operands.layout.size;
    std::map<int, std::size_t> last;  // slot -> index of its newest row
    for (std::size_t i = 0; i < it->second.size(); ++i) {
        const OperandKey k = TraceFile::key_at(rows.data() + i * n);
        last[operand_slot(k.linear, k.gemm, k.operand)] = i;
    }
    const auto blocks = d.decoder().read_blocks(rows, it->second.size());
    d.file.blocks = &blocks;
    struct Unset {
        const Impl& d;
        ~Unset() { d.file.blocks = nullptr; }
    } unset{d};
    for (const auto& [slot, i] : last) out.push_back(d.decoder().decode_operand(rows.data() + i * n, it->second[i]));
    return out;
}

namespace {

// One operand row's point: its scalar figures and its errors (read from /operands/errors).
OperandPoint point_of(const RecordDecoder& decoder, const unsigned char* bytes, hsize_t row) {
    OperandRecord r;
    s::OperandSpans spans;
    s::get_row<s::OperandTable>(bytes, r, spans);
    decoder.check_quantizer_in_use(r.quantizer_in_use, row);
    OperandPoint p;
    p.step = r.key.step;
    p.quantizer_in_use = r.quantizer_in_use;
    p.amax = r.stats.amax;
    p.scale = r.scale;
    p.kurtosis = r.stats.outliers.kurtosis;
    p.dynamic_range = r.stats.dynamic_range;
    p.errors = decoder.read_errors(spans, row, false);
    return p;
}

// A step recorded again after a rewind replaces the earlier point.
void keep_later_of_each_step(std::vector<OperandPoint>& v) {
    std::size_t n = 0;
    for (std::size_t i = 0; i < v.size(); ++i) {
        if (n > 0 && v[n - 1].step == v[i].step) v[n - 1] = std::move(v[i]);
        else if (n != i) v[n++] = std::move(v[i]);
        else ++n;
    }
    v.resize(n);
}

}  // namespace

std::vector<OperandPoint> TraceReader::operand_series(int run, int linear, Gemm gemm, Operand operand) const {
    const Impl& d = *impl_;
    std::vector<OperandPoint> out;
    auto it = d.index.series_rows.find({run, operand_slot(linear, gemm, operand)});
    if (it == d.index.series_rows.end()) return out;
    std::vector<hsize_t> idx;
    for (const auto& [step, row] : it->second) idx.push_back(row);
    const auto rows = d.file.read_table_at(d.file.operands, idx);
    for (std::size_t i = 0; i < idx.size(); ++i)
        out.push_back(point_of(d.decoder(), rows.data() + i * d.file.operands.layout.size, idx[i]));
    keep_later_of_each_step(out);
    return out;
}

std::vector<std::vector<OperandPoint>> TraceReader::run_operand_series(int run) const {
    const Impl& d = *impl_;
    std::vector<std::vector<OperandPoint>> out(std::size_t(d.file.slots));
    // Every point of the run, read in file order: the compressed errors of a capture step
    // are then inflated once, where a series at a time inflates each chunk once per series.
    struct At {
        hsize_t row;
        std::size_t slot, i;
    };
    std::vector<At> at;
    for (std::size_t slot = 0; slot < out.size(); ++slot) {
        auto it = d.index.series_rows.find({run, int(slot)});
        if (it == d.index.series_rows.end()) continue;
        out[slot].resize(it->second.size());
        for (std::size_t i = 0; i < it->second.size(); ++i) at.push_back({it->second[i].second, slot, i});
    }
    std::sort(at.begin(), at.end(), [](const At& a, const At& b) { return a.row < b.row; });
    constexpr std::size_t kRowsPerRead = 4096;  // operand rows read at a time: memory stays flat
    for (std::size_t from = 0; from < at.size(); from += kRowsPerRead) {
        const std::size_t n = std::min(kRowsPerRead, at.size() - from);
        std::vector<hsize_t> idx(n);
        for (std::size_t k = 0; k < n; ++k) idx[k] = at[from + k].row;
        const auto rows = d.file.read_table_at(d.file.operands, idx);
        for (std::size_t k = 0; k < n; ++k) {
            const At& a = at[from + k];
            out[a.slot][a.i] = point_of(d.decoder(), rows.data() + k * d.file.operands.layout.size, a.row);
        }
    }
    for (auto& v : out) keep_later_of_each_step(v);
    return out;
}

std::vector<std::int64_t> TraceReader::blockmap_steps(int run) const {
    std::vector<std::int64_t> out;
    for (auto it = impl_->index.blockmap_rows.lower_bound({run, INT64_MIN});
         it != impl_->index.blockmap_rows.end() && it->first.first == run; ++it)
        out.push_back(it->first.second);
    return out;
}

std::vector<BlockMapRecord> TraceReader::blockmaps(const OperandKey& key) const {
    const Impl& d = *impl_;
    std::vector<BlockMapRecord> out;
    auto it = d.index.blockmap_rows.find({key.run, key.step});
    if (it == d.index.blockmap_rows.end()) return out;
    const auto rows = d.file.read_table_at(d.file.blockmaps, it->second);
    const std::size_t n = d.file.blockmaps.layout.size;
    std::map<int, std::size_t> last;  // quantizer -> newest row of this operand
    for (std::size_t i = 0; i < it->second.size(); ++i) {
        BlockMapRecord b;
        s::BlockMapSpan span;
        s::get_row<s::BlockMapTable>(rows.data() + i * n, b, span);
        if (b.key.linear == key.linear && b.key.gemm == key.gemm && b.key.operand == key.operand) last[b.quantizer] = i;
    }
    for (const auto& [quantizer, i] : last) out.push_back(d.decoder().decode_blockmap(rows.data() + i * n, it->second[i]));
    return out;
}

namespace {

// The rows of the steps in [from, to] of a step-ordered run index.
std::vector<hsize_t> rows_in(const std::vector<TraceIndex::OpRows>& v, std::int64_t from, std::int64_t to) {
    std::vector<hsize_t> idx;
    auto lo = std::lower_bound(v.begin(), v.end(), from, [](const auto& a, std::int64_t s) { return a.step < s; });
    for (auto it = lo; it != v.end() && it->step <= to; ++it)
        for (hsize_t k = 0; k < it->count; ++k) idx.push_back(it->first + k);
    return idx;
}

}  // namespace

std::vector<OpRecord> TraceReader::ops(int run, std::int64_t from, std::int64_t to) const {
    const Impl& d = *impl_;
    std::vector<OpRecord> out;
    if (run < 0 || run >= static_cast<int>(d.index.op_rows.size())) return out;
    const std::vector<hsize_t> idx = rows_in(d.index.op_rows[run], from, to);
    const auto rows = d.file.read_table_at(d.file.ops, idx);
    out.resize(idx.size());
    // The index checked these rows (check_op_row).
    for (std::size_t i = 0; i < idx.size(); ++i) s::get_row<s::OpTable>(rows.data() + i * d.file.ops.layout.size, out[i]);
    return out;
}

std::vector<KernelStepRecord> TraceReader::kernel_steps(int run, std::int64_t from, std::int64_t to) const {
    const Impl& d = *impl_;
    std::vector<KernelStepRecord> out;
    if (run < 0 || run >= static_cast<int>(d.meta.runs.size())) return out;
    if (d.file.format_version < 6) {
        // Records with no op are tagged run 0 whichever run they belong to: every run's
        // records of the steps go into the sums.
        std::vector<OpRecord> all;
        for (int r = 0; r < static_cast<int>(d.meta.runs.size()); ++r)
            for (OpRecord& o : ops(r, from, to))
                if (o.device >= 0) all.push_back(o);
        for (KernelStepRecord& k : sum_kernel_steps(std::move(all), true))
            if (k.run == run) out.push_back(k);
        return out;
    }
    if (run >= static_cast<int>(d.index.kernel_step_rows.size())) return out;
    const std::vector<hsize_t> idx = rows_in(d.index.kernel_step_rows[run], from, to);
    const auto rows = d.file.read_table_at(d.file.kernel_steps, idx);
    out.resize(idx.size());
    for (std::size_t i = 0; i < idx.size(); ++i)
        s::get_row<s::KernelStepTable>(rows.data() + i * d.file.kernel_steps.layout.size, out[i]);
    return out;
}

}  // namespace fp8scope::trace
