// Transformer Engine statistics logs -> trace metadata and records.
#include "te_log_trace.h"

#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <stdexcept>

#include "record_fields.h"
#include "trace_writer.h"

namespace fp8scope::te_log {

namespace {

using trace::OperandRecord;
constexpr double kNaN = trace::kNone;

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
    const std::string tmp = out + ".tmp." + std::to_string(::getpid());
    ImportCounts n;
    try {
        {
            trace::TraceWriter writer(tmp, c.meta);
            CountingSink counted(writer, n);
            write_records(log, c, counted);
            writer.close();
        }
        write_raw_tables(tmp, log, c.linear_of_layer);
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

}  // namespace fp8scope::te_log
