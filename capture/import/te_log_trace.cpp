// Transformer Engine statistics logs -> trace records, and the raw tables beside them.
#include "te_log_trace.h"

#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <tuple>

#include "h5.h"
#include "record_fields.h"
#include "trace_schema.h"
#include "trace_writer.h"

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

using trace::OperandRecord;
constexpr double kNaN = trace::kNone;
constexpr std::size_t kStatChars = 256, kFileChars = 1024;

template <std::size_t N>
struct Names {
    using Objects = std::tuple<std::string>;
    template <class V, class S>
    static void columns(V&& v, S& name) { v("name", name, fields::MaxChars<N>{}); }
};
using RowTable = trace::schema::RecordTable<RawRow>;

// The transformer block of a module path: its first all-digit component
// ("model.decoder.layers.3.mlp.fc1" -> 3); 0 when it has none.
int block_of(const std::string& layer) {
    std::size_t start = 0;
    while (start <= layer.size()) {
        std::size_t end = layer.find('.', start);
        if (end == std::string::npos) end = layer.size();
        const std::string_view part(layer.data() + start, end - start);
        if (!part.empty() && part.size() < 9 && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; }))
            return std::stoi(std::string(part));
        start = end + 1;
    }
    return 0;
}

// TE's tensors that are GEMM operands, and the two GEMMs that read each: the first reads
// the rowwise copy, the second the columnwise (transposed) one: fprop X W^T, dgrad dY W,
// wgrad dY^T X.
struct OperandGemms {
    Operand operand;
    Gemm rowwise, columnwise;
};
std::optional<OperandGemms> operand_of(Tensor t) {
    switch (t) {
        case Tensor::Activation: return OperandGemms{Operand::X, Gemm::Fprop, Gemm::Wgrad};
        case Tensor::Weight: return OperandGemms{Operand::W, Gemm::Fprop, Gemm::Dgrad};
        case Tensor::Gradient: return OperandGemms{Operand::DY, Gemm::Dgrad, Gemm::Wgrad};
        default: return std::nullopt;
    }
}

// Per-tensor scaling has one scale for both copies, so a rowwise figure is the
// transposed copy's too (TE refuses _columnwise for these recipes).
bool per_tensor(const std::string& quantizer) {
    return quantizer == "fp8_delayed_scaling" || quantizer == "fp8_current_scaling";
}

// Every figure "not computed"; no name: the trace names quantizers in its meta.
ErrorStats not_computed() {
    ErrorStats e;
    e.amax = e.mse = e.sqnr_db = e.rel_l2 = e.max_abs_err = e.cosine = kNaN;
    e.underflow_pct = e.overflow_pct = e.scale_inv_min = e.scale_inv_max = kNaN;
    return e;
}

// What the log says of one operand at one iteration.
struct OperandFigures {
    double cur_amax = kNaN, min = kNaN, max = kNaN, mean = kNaN, std = kNaN, dynamic_range = kNaN;
    std::vector<ErrorStats> rowwise, columnwise;
    std::vector<bool> has_rowwise, has_columnwise;
    const std::vector<bool>* one_scale = nullptr;  // by quantizer: per_tensor()

    explicit OperandFigures(const std::vector<bool>& per_tensor_quantizers)
        : rowwise(per_tensor_quantizers.size(), not_computed()),
          columnwise(rowwise),
          has_rowwise(rowwise.size()),
          has_columnwise(rowwise.size()),
          one_scale(&per_tensor_quantizers) {}
    // amax is max |x| = max(|min|, |max|) when TE's cur_amax was not logged.
    double amax() const {
        if (!std::isnan(cur_amax)) return cur_amax;
        return std::isnan(min) || std::isnan(max) ? kNaN : std::max(std::fabs(min), std::fabs(max));
    }
    void set(const StatName& s, int quantizer, double v) {
        switch (s.kind) {
            case StatKind::CurAmax: cur_amax = v; return;
            case StatKind::Min: min = v; return;
            case StatKind::Max: max = v; return;
            case StatKind::Mean: mean = v; return;
            case StatKind::Std: std = v; return;
            case StatKind::DynamicRange: dynamic_range = v; return;
            default: break;
        }
        if (!s.quantized()) return;  // l1_norm, l2_norm, blockwise dynamic range: /meta/te_log only
        ErrorStats& e = (s.columnwise ? columnwise : rowwise)[quantizer];
        (s.columnwise ? has_columnwise : has_rowwise)[quantizer] = true;
        switch (s.kind) {
            case StatKind::Underflows: e.underflow_pct = v; break;
            case StatKind::Overflows: e.overflow_pct = v; break;
            case StatKind::ScaleInvMin: e.scale_inv_min = v; break;
            case StatKind::ScaleInvMax: e.scale_inv_max = v; break;
            case StatKind::Mse: e.mse = v; break;
            default: break;
        }
    }
    TensorStats stats() const {
        TensorStats t;
        t.amax = amax();
        t.mean = mean;
        t.stddev = std;
        t.dynamic_range = dynamic_range;
        t.min_nonzero_abs = t.rms = kNaN;
        t.outliers.kurtosis = t.outliers.k = t.outliers.frac_beyond_k_rms = kNaN;
        return t;
    }
    // The errors of the GEMM that reads the columnwise copy.
    std::vector<ErrorStats> transposed() const {
        std::vector<ErrorStats> out = columnwise;
        for (std::size_t q = 0; q < out.size(); ++q)
            if (!has_columnwise[q] && has_rowwise[q] && (*one_scale)[q]) out[q] = rowwise[q];
        return out;
    }
};

std::vector<std::string> run_names(const std::vector<LogFile>& files) {
    std::map<int, int> per_rank;
    for (const auto& f : files) ++per_rank[f.rank];
    std::vector<std::string> names;
    for (const auto& f : files) {
        std::string name = f.rank >= 0 && per_rank[f.rank] == 1
                               ? "rank " + std::to_string(f.rank)
                               : std::filesystem::path(f.path).filename().string();
        if (name.size() > trace::kRunNameChars) name.resize(trace::kRunNameChars);
        names.push_back(name);
    }
    return names;
}

}  // namespace

Converted convert(const Log& log, const std::string& tool_version) {
    if (log.values.empty()) throw std::runtime_error("the logs hold no statistics");
    Converted c;
    trace::TraceMeta& m = c.meta;
    m.tool_version = tool_version;
    m.machine = "Transformer Engine statistics logs";
    m.baseline_run = -1;  // every rank trained one recipe
    const auto names = run_names(log.files);
    for (const auto& n : names) m.runs.push_back({n, ""});

    // Linears: the layers with a tensor name, by block, then in order of appearance.
    c.linear_of_layer.assign(log.layers.size(), -1);
    std::vector<int> order(log.layers.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = int(i);
    std::stable_sort(order.begin(), order.end(),
                     [&](int a, int b) { return block_of(log.layers[a]) < block_of(log.layers[b]); });
    for (int l : order) {
        const std::string& name = log.layers[l];
        if (name.size() > trace::kNameChars)
            throw std::runtime_error("layer name longer than " + std::to_string(trace::kNameChars) +
                                     " characters: " + name.substr(0, 60) + "...");
        c.linear_of_layer[l] = std::int32_t(m.linears.size());
        m.linears.push_back({name, block_of(name), 0, 0});
    }

    // Quantizers: the recipe in use (a bare statistic), then TE's recipes as named.
    bool in_use = false;
    std::vector<std::string> recipes;
    for (const auto& s : log.stats) {
        c.stat_names.push_back(parse_stat(s));
        const StatName& n = c.stat_names.back();
        if (!n.quantized()) continue;
        if (n.recipe.empty()) in_use = true;
        else if (std::find(recipes.begin(), recipes.end(), n.recipe) == recipes.end()) recipes.push_back(n.recipe);
    }
    if (in_use) m.quantizers.push_back(kInUseQuantizer);
    m.quantizers.insert(m.quantizers.end(), recipes.begin(), recipes.end());

    // The smallest gap between logged iterations: TE's freq, as far as the log shows it.
    std::vector<std::set<std::int64_t>> iterations(log.files.size());
    for (const Value& v : log.values) iterations[v.file].insert(v.iteration);
    std::uint64_t every = 0;  // unsigned: the gap between any two int64 iterations fits
    for (const auto& steps : iterations)
        for (auto it = steps.begin(); it != steps.end() && std::next(it) != steps.end(); ++it) {
            const std::uint64_t gap = std::uint64_t(*std::next(it)) - std::uint64_t(*it);
            every = every == 0 ? gap : std::min(every, gap);
        }
    m.capture_every = std::int64_t(std::clamp<std::uint64_t>(every, 1, INT64_MAX));

    nlohmann::json config = {{"import", "te_log"}, {"files", nlohmann::json::array()}};
    for (std::size_t f = 0; f < log.files.size(); ++f)
        config["files"].push_back({{"path", log.files[f].path}, {"rank", log.files[f].rank}, {"run", names[f]}});
    m.config_json = config.dump();

    return c;
}

void write_records(const Log& log, const Converted& c, trace::RecordSink& sink) {
    const trace::TraceMeta& m = c.meta;
    const std::int32_t quantizer_in_use =
        !m.quantizers.empty() && m.quantizers[0] == kInUseQuantizer ? 0 : -1;
    auto quantizer_of = [&](const StatName& n) -> int {
        const std::string& q = n.recipe.empty() ? std::string(kInUseQuantizer) : n.recipe;
        return int(std::find(m.quantizers.begin(), m.quantizers.end(), q) - m.quantizers.begin());
    };
    const std::size_t slots = m.linears.size() * trace::kOperandsPerLinear;
    std::vector<bool> per_tensor_quantizers;
    for (const auto& q : m.quantizers) per_tensor_quantizers.push_back(per_tensor(q));

    // One (run, iteration) at a time: the values' indices by file, then iteration, then line.
    std::vector<std::size_t> order(log.values.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
        const Value &x = log.values[a], &y = log.values[b];
        return x.file != y.file ? x.file < y.file : x.iteration < y.iteration;
    });
    for (std::size_t i = 0; i < order.size();) {
        const Value& first = log.values[order[i]];
        const std::int32_t run = first.file;
        const std::int64_t step = first.iteration;
        if (i == 0 || log.values[order[i - 1]].file != run)
            sink.write(trace::EventRecord{run, step, EventKind::Start,
                                          "imported from Transformer Engine statistics log " + log.files[run].path});
        // (linear, tensor) -> figures; a value logged twice: the later line wins.
        std::map<std::pair<int, int>, OperandFigures> figures;
        for (; i < order.size() && log.values[order[i]].file == run && log.values[order[i]].iteration == step; ++i) {
            const Value& v = log.values[order[i]];
            if (v.layer < 0 || !operand_of(static_cast<Tensor>(v.tensor))) continue;
            const StatName& s = c.stat_names[v.stat];
            if (s.kind == StatKind::Unknown) continue;
            auto it = figures.try_emplace({c.linear_of_layer[v.layer], int(v.tensor)}, per_tensor_quantizers).first;
            it->second.set(s, s.quantized() ? quantizer_of(s) : -1, v.value);
        }
        trace::StepRecord record;
        record.run = run;
        record.step = step;
        sink.write(record);
        trace::ScalingRecord scaling{run, step, std::vector<float>(slots, NAN), std::vector<float>(slots, NAN)};
        for (const auto& [key, f] : figures) {
            const OperandGemms og = *operand_of(static_cast<Tensor>(key.second));
            for (Gemm g : {og.rowwise, og.columnwise}) {
                scaling.amax[trace::operand_slot(key.first, g, og.operand)] = float(f.amax());
                OperandRecord o;
                o.key = {run, step, key.first, g, og.operand};
                o.quantizer_in_use = quantizer_in_use;
                o.stats = f.stats();
                o.errors = g == og.rowwise ? f.rowwise : f.transposed();
                sink.write(std::move(o));
            }
        }
        sink.write(std::move(scaling));
    }
}

namespace {

// A table written once into the closed trace, chunked and deflated like the trace's own
// span data.
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

namespace {
// Counts what goes by on its way to the trace.
class CountingSink : public trace::RecordSink {
public:
    CountingSink(trace::RecordSink& to, ImportCounts& n) : to_(to), n_(n) {}
    void write(trace::Record r) override {
        if (const auto* s = std::get_if<trace::StepRecord>(&r)) {
            n_.first_step = n_.steps == 0 ? s->step : std::min(n_.first_step, s->step);
            n_.last_step = n_.steps == 0 ? s->step : std::max(n_.last_step, s->step);
            ++n_.steps;
        }
        n_.operands += std::holds_alternative<OperandRecord>(r);
        to_.write(std::move(r));
    }

private:
    trace::RecordSink& to_;
    ImportCounts& n_;
};
}  // namespace

ImportCounts write_trace(const Log& log, const Converted& c, const std::string& out) {
    for (const auto& f : log.files)
        if (f.path.size() > kFileChars) throw std::runtime_error(f.path.substr(0, 60) + "...: path longer than the trace keeps");
    for (const auto& s : log.stats)
        if (s.size() > kStatChars) throw std::runtime_error("metric name longer than the trace keeps: " + s.substr(0, 60) + "...");
    const std::string tmp = out + ".tmp." + std::to_string(::getpid());
    ImportCounts n;
    try {
        {
            trace::TraceWriter writer(tmp, c.meta);
            CountingSink counted(writer, n);
            write_records(log, c, counted);
            writer.close();
        }
        h5::quiet_errors();
        h5::Id file = h5::check(H5Fopen(tmp.c_str(), H5F_ACC_RDWR, H5P_DEFAULT), tmp + ": cannot open the trace");
        write_table<RowTable>(file, tmp, kValuesTable, log.values.size(), [&](std::size_t i) {
            const Value& v = log.values[i];
            return RawRow{v.file, v.iteration, v.layer < 0 ? -1 : c.linear_of_layer[v.layer], v.tensor, v.stat,
                          v.value, v.file, v.line};
        });
        write_table<Names<kStatChars>>(file, tmp, kStatsTable, log.stats.size(),
                                       [&](std::size_t i) -> const std::string& { return log.stats[i]; });
        write_table<Names<kFileChars>>(file, tmp, kFilesTable, log.files.size(),
                                       [&](std::size_t i) -> const std::string& { return log.files[i].path; });
        file.reset();
        std::filesystem::rename(tmp, out);
    } catch (...) {
        std::error_code ec;
        std::filesystem::remove(tmp, ec);
        throw;
    }
    n.runs = c.meta.runs.size();
    n.linears = c.meta.linears.size();
    n.values = log.values.size();
    return n;
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
