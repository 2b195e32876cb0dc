// Rewriting a trace in today's format, and checking that it reads back the same
// (trace_compact.h).
#include "trace_compact.h"

#include <climits>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>

#include "trace_reader.h"
#include "trace_schema.h"
#include "trace_writer.h"

namespace fp8scope::trace {
namespace s = schema;

namespace {

// Every record of `r` in the order a writer takes it: per run, then the events and rank
// steps (each read keeps its file order).
void for_each_record(const TraceReader& r, const std::function<void(Record)>& put) {
    const TraceMeta& m = r.meta();
    for (int run = 0; run < static_cast<int>(m.runs.size()); ++run) {
        for (auto& x : r.steps(run)) put(std::move(x));
        for (auto& x : r.scaling(run, INT64_MIN, INT64_MAX)) put(std::move(x));
        for (std::int64_t step : r.capture_steps(run))
            for (auto& x : r.operands(run, step)) put(std::move(x));
        for (std::int64_t step : r.blockmap_steps(run))
            for (int l = 0; l < static_cast<int>(m.linears.size()); ++l)
                for (Gemm g : {Gemm::Fprop, Gemm::Dgrad, Gemm::Wgrad})
                    for (Operand o : {Operand::X, Operand::W, Operand::DY})
                        if (operand_slot(l, g, o) >= 0)
                            for (auto& x : r.blockmaps({run, step, l, g, o})) put(std::move(x));
        for (auto& x : r.ops(run, INT64_MIN, INT64_MAX)) put(std::move(x));
        for (auto& x : r.kernel_steps(run, INT64_MIN, INT64_MAX)) put(std::move(x));
        for (auto& x : r.gemm_errors(run)) put(std::move(x));
        for (auto& x : r.gate_up_alignment(run)) put(std::move(x));
    }
    for (auto& x : r.events()) put(std::move(x));
    for (auto& x : r.rank_steps()) put(std::move(x));
}

// A record's columns as the file row they make: two records are the same when these bytes
// are (NaNs included).
template <class Table, class... O>
std::vector<unsigned char> row_bytes(const O&... objects) {
    static const std::size_t size = s::layout<Table>().size;
    std::vector<unsigned char> row(size);
    s::put_row<Table>(row.data(), objects...);
    return row;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// `b` is `a` rounded to bfloat16 (or `a` itself): within half a unit of bfloat16's last
// of 8 significant bits.
bool within_bfloat16(const std::vector<float>& a, const std::vector<float>& b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i) {
        if (std::isnan(a[i]) != std::isnan(b[i])) return false;
        if (std::isnan(a[i]) || a[i] == b[i]) continue;
        if (!(std::fabs(b[i] - a[i]) <= std::ldexp(std::fabs(a[i]), -8))) return false;
    }
    return true;
}

std::string key_text(const OperandKey& k) {
    return "run " + std::to_string(k.run) + " step " + std::to_string(k.step) + " linear " +
           std::to_string(k.linear) + " gemm " + std::to_string(static_cast<int>(k.gemm)) + " operand " +
           std::to_string(static_cast<int>(k.operand));
}

std::string differ(const OperandRecord& a, const OperandRecord& b) {
    const std::string at = "operand at " + key_text(a.key);
    if (row_bytes<s::OperandTable>(a, s::OperandSpans{}) != row_bytes<s::OperandTable>(b, s::OperandSpans{}))
        return at + ": its figures differ";
    if (a.stats.histogram.bins != b.stats.histogram.bins) return at + ": its histogram differs";
    if (a.errors.size() != b.errors.size()) return at + ": the number of quantizer errors differs";
    for (std::size_t i = 0; i < a.errors.size(); ++i)
        if (row_bytes<s::ErrorTable>(std::int32_t(i), a.errors[i]) != row_bytes<s::ErrorTable>(std::int32_t(i), b.errors[i]))
            return at + ": the error under quantizer " + std::to_string(i) + " differs";
    if (!within_bfloat16(a.stats.outliers.channel_absmax, b.stats.outliers.channel_absmax))
        return at + ": channel absmax differs by more than bfloat16's rounding";
    if (a.stats.outliers.top.size() != b.stats.outliers.top.size()) return at + ": the number of top values differs";
    for (std::size_t i = 0; i < a.stats.outliers.top.size(); ++i)
        if (row_bytes<s::TopTable>(a.stats.outliers.top[i]) != row_bytes<s::TopTable>(b.stats.outliers.top[i]))
            return at + ": top value " + std::to_string(i) + " differs";
    if (!same_bits(a.amax_history, b.amax_history)) return at + ": the amax history differs";
    return "";
}

std::string differ(const BlockMapRecord& a, const BlockMapRecord& b) {
    const std::string at = "block map at " + key_text(a.key) + " quantizer " + std::to_string(a.quantizer);
    if (row_bytes<s::BlockMapTable>(a, s::BlockMapSpan{}) != row_bytes<s::BlockMapTable>(b, s::BlockMapSpan{}))
        return at + ": its shape differs";
    if (!same_bits(a.scale_inv, b.scale_inv)) return at + ": scale_inv differs";
    if (!within_bfloat16(a.absmax, b.absmax)) return at + ": absmax differs by more than bfloat16's rounding";
    if (!within_bfloat16(a.sqnr_db, b.sqnr_db)) return at + ": SQNR differs by more than bfloat16's rounding";
    return "";
}

template <class R>
std::string differ(const R& a, const R& b) {
    return row_bytes<s::RecordTable<R>>(a) == row_bytes<s::RecordTable<R>>(b) ? "" : "a record differs";
}
std::string differ(const ScalingRecord& a, const ScalingRecord& b) {
    if (row_bytes<s::ScalingIndexTable>(a) != row_bytes<s::ScalingIndexTable>(b) || !same_bits(a.amax, b.amax) ||
        !same_bits(a.scale, b.scale))
        return "scaling at run " + std::to_string(a.run) + " step " + std::to_string(a.step) + " differs";
    return "";
}
std::string differ(const OpNameRecord& a, const OpNameRecord& b) { return a.name == b.name ? "" : "an op name differs"; }

}  // namespace

CompactCounts compact_trace(const std::string& in, const std::string& out) {
    std::error_code ec;
    if (std::filesystem::weakly_canonical(in, ec) == std::filesystem::weakly_canonical(out, ec) ||
        std::filesystem::equivalent(in, out, ec))
        throw TraceError(out, "is the input trace: compact writes a new file and never overwrites its input");
    TraceReader r(in);
    TraceMeta meta = r.meta();  // ops: every name the file has, so each op row's id stays
    TraceWriter w(out, meta);
    CompactCounts n;
    for_each_record(r, [&](Record rec) {
        std::visit([&](const auto& x) {
            using T = std::decay_t<decltype(x)>;
            if constexpr (std::is_same_v<T, StepRecord>) ++n.steps;
            else if constexpr (std::is_same_v<T, EventRecord>) ++n.events;
            else if constexpr (std::is_same_v<T, ScalingRecord>) ++n.scaling;
            else if constexpr (std::is_same_v<T, OperandRecord>) ++n.operands;
            else if constexpr (std::is_same_v<T, BlockMapRecord>) ++n.blockmaps;
            else if constexpr (std::is_same_v<T, OpRecord>) ++n.ops;
            else if constexpr (std::is_same_v<T, RankStepRecord>) ++n.ranks;
            else if constexpr (std::is_same_v<T, GemmErrorRecord>) ++n.gemm_errors;
            else if constexpr (std::is_same_v<T, KernelStepRecord>) ++n.kernel_steps;
            else if constexpr (std::is_same_v<T, GateUpAlignmentRecord>) ++n.gate_up;
        }, rec);
        w.write(std::move(rec));
    });
    w.close();
    return n;
}

std::string compare_traces(const std::string& a_path, const std::string& b_path) {
    TraceReader a(a_path), b(b_path);
    TraceMeta ma = a.meta(), mb = b.meta();
    ma.format_version = mb.format_version = 0;  // the one thing a rewrite changes
    if (ma.runs.size() != mb.runs.size() || ma.linears.size() != mb.linears.size() || ma.ops != mb.ops ||
        ma.quantizers != mb.quantizers || ma.training_recipes != mb.training_recipes ||
        ma.config_json != mb.config_json || ma.created != mb.created || ma.machine != mb.machine ||
        ma.capture_every != mb.capture_every || ma.blockmap_every != mb.blockmap_every || ma.rank != mb.rank ||
        ma.world_size != mb.world_size || ma.baseline_run != mb.baseline_run ||
        ma.kernel_timings != mb.kernel_timings || ma.kernel_window != mb.kernel_window)
        return "the metadata differs";
    std::vector<Record> ra, rb;
    for_each_record(a, [&](Record r) { ra.push_back(std::move(r)); });
    for_each_record(b, [&](Record r) { rb.push_back(std::move(r)); });
    if (ra.size() != rb.size())
        return "the number of records differs: " + std::to_string(ra.size()) + " vs " + std::to_string(rb.size());
    for (std::size_t i = 0; i < ra.size(); ++i) {
        if (ra[i].index() != rb[i].index()) return "record " + std::to_string(i) + " is of another kind";
        const std::string d = std::visit([&](const auto& x) {
            return differ(x, std::get<std::decay_t<decltype(x)>>(rb[i]));
        }, ra[i]);
        if (!d.empty()) return "record " + std::to_string(i) + ": " + d;
    }
    return "";
}

}  // namespace fp8scope::trace
