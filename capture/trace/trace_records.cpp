// Names and slot layout of the trace data model (trace_records.h).
#include "trace_records.h"

#include "fp8/training_recipe.h"

#include <algorithm>
#include <climits>

#include <string>

namespace fp8scope::trace {

const char* op_kind_name(OpKind k) {
    switch (k) {
        case OpKind::Host: return "host";
        case OpKind::Kernel: return "kernel";
        case OpKind::Memcpy: return "memcpy";
        case OpKind::Memset: return "memset";
    }
    return "?";
}

int baseline_by_recipe(const std::vector<RunInfo>& runs) {
    for (std::size_t r = 0; r < runs.size(); ++r)
        if (quantizes_nothing(runs[r].recipe)) return static_cast<int>(r);
    return -1;
}

int baseline_of(const TraceMeta& meta) {
    if (meta.baseline_run == TraceMeta::kNotRecorded) return baseline_by_recipe(meta.runs);
    const bool known = meta.baseline_run >= 0 && meta.baseline_run < static_cast<int>(meta.runs.size());
    return known ? meta.baseline_run : -1;
}

// Slot = linear * 6 + gemm * 2 + (0: the GEMM's left operand, 1: its right operand):
// fprop (x, w), dgrad (dy, w), wgrad (dy, x).
int operand_slot(int linear, Gemm gemm, Operand operand) {
    // Past this the slot would not fit an int (a damaged or hostile linear id).
    if (linear < 0 || linear > (INT_MAX - kOperandsPerLinear) / kOperandsPerLinear) return -1;
    int side = -1;
    switch (gemm) {
        case Gemm::Fprop: side = operand == Operand::X ? 0 : operand == Operand::W ? 1 : -1; break;
        case Gemm::Dgrad: side = operand == Operand::DY ? 0 : operand == Operand::W ? 1 : -1; break;
        case Gemm::Wgrad: side = operand == Operand::DY ? 0 : operand == Operand::X ? 1 : -1; break;
    }
    if (side < 0) return -1;
    return linear * kOperandsPerLinear + static_cast<int>(gemm) * 2 + side;
}

namespace {

std::string out_of_range(const char* field, long long v, long long end) {
    return std::string(field) + " = " + std::to_string(v) + " is outside [0, " + std::to_string(end) + ")";
}

std::string check_key(const TraceMeta& m, const OperandKey& k) {
    if (k.run < 0 || k.run >= static_cast<int>(m.runs.size())) return out_of_range("run", k.run, m.runs.size());
    if (k.linear < 0 || k.linear >= static_cast<int>(m.linears.size()))
        return out_of_range("linear", k.linear, m.linears.size());
    if (static_cast<int>(k.gemm) > 2) return out_of_range("gemm", static_cast<int>(k.gemm), 3);
    if (static_cast<int>(k.operand) > 2) return out_of_range("operand", static_cast<int>(k.operand), 3);
    if (operand_slot(k.linear, k.gemm, k.operand) < 0)
        return "operand " + std::to_string(static_cast<int>(k.operand)) + " is not an operand of gemm " +
               std::to_string(static_cast<int>(k.gemm));
    return {};
}

std::string check_run(const TraceMeta& m, std::int32_t run) {
    if (run < 0 || run >= static_cast<int>(m.runs.size())) return out_of_range("run", run, m.runs.size());
    return {};
}

}  // namespace

std::vector<GemmPrecision> run_precision(const TraceMeta& meta, int run) {
    std::vector<GemmPrecision> out;
    for (const GemmPrecision& p : meta.precision)
        if (p.run == run) out.push_back(p);
    if (out.size() != meta.linears.size() * 3) return {};
    std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
        return std::pair(a.linear, int(a.gemm)) < std::pair(b.linear, int(b.gemm));
    });
    return out;
}

std::string check_meta(const TraceMeta& m) {
    if (m.world_size < 1) return "world_size " + std::to_string(m.world_size) + " is not a process count";
    if (m.rank < 0 || m.rank >= m.world_size) return out_of_range("rank", m.rank, m.world_size);
    return {};
}

std::string check_record(const TraceMeta& m, std::size_t ops, const Record& record) {
    const auto quantizers = static_cast<long long>(m.quantizers.size());
    if (auto* r = std::get_if<StepRecord>(&record)) {
        if (auto e = check_run(m, r->run); !e.empty()) return "step: " + e;
        if (r->recipe < -1 || r->recipe >= static_cast<int>(m.training_recipes.size()))
            return "step: " + out_of_range("recipe", r->recipe, m.training_recipes.size());
    } else if (auto* r = std::get_if<EventRecord>(&record)) {
        if (r->run != -1)
            if (auto e = check_run(m, r->run); !e.empty()) return "event: " + e;
        auto k = static_cast<int>(r->kind);
        if (k < 0 || k > static_cast<int>(kLastEventKind))
            return "event: " + out_of_range("kind", k, static_cast<int>(kLastEventKind) + 1);
    } else if (auto* r = std::get_if<ScalingRecord>(&record)) {
        if (auto e = check_run(m, r->run); !e.empty()) return "scaling: " + e;
        std::size_t slots = m.linears.size() * kOperandsPerLinear;
        if (r->amax.size() != slots || r->scale.size() != slots)
            return "scaling: amax/scale hold " + std::to_string(r->amax.size()) + "/" +
                   std::to_string(r->scale.size()) + " values, expected " + std::to_string(slots);
    } else if (auto* r = std::get_if<OperandRecord>(&record)) {
        if (auto e = check_key(m, r->key); !e.empty()) return "operand: " + e;
        if (r->quantizer_in_use < -1 || r->quantizer_in_use >= quantizers)
            return "operand: " + out_of_range("quantizer_in_use", r->quantizer_in_use, quantizers);
        if (!r->errors.empty() && static_cast<long long>(r->errors.size()) != quantizers)
            return "operand: " + std::to_string(r->errors.size()) + " error entries, expected " +
                   std::to_string(quantizers);
    } else if (auto* r = std::get_if<BlockMapRecord>(&record)) {
        if (auto e = check_key(m, r->key); !e.empty()) return "blockmap: " + e;
        if (r->quantizer < 0 || r->quantizer >= quantizers)
            return "blockmap: " + out_of_range("quantizer", r->quantizer, quantizers);
        if (r->grid_rows < 0 || r->grid_cols < 0 || r->tile_rows < 0 || r->tile_cols < 0)
            return "blockmap: negative grid or tile size";
        auto cells = static_cast<std::size_t>(r->grid_rows) * static_cast<std::size_t>(r->grid_cols);
        if (r->absmax.size() != cells || r->scale_inv.size() != cells || r->sqnr_db.size() != cells)
            return "blockmap: maps must hold grid_rows * grid_cols = " + std::to_string(cells) + " values";
    } else if (auto* r = std::get_if<OpRecord>(&record)) {
        if (auto e = check_run(m, r->run); !e.empty()) return "op: " + e;
        if (r->op < 0 || static_cast<std::size_t>(r->op) >= ops) return "op: " + out_of_range("op", r->op, ops);
    } else if (auto* r = std::get_if<GemmErrorRecord>(&record)) {
        if (auto e = check_run(m, r->run); !e.empty()) return "gemm error: " + e;
        if (r->linear < 0 || r->linear >= static_cast<int>(m.linears.size()))
            return "gemm error: " + out_of_range("linear", r->linear, m.linears.size());
        if (static_cast<int>(r->gemm) > 2) return "gemm error: " + out_of_range("gemm", static_cast<int>(r->gemm), 3);
    } else if (auto* r = std::get_if<GateUpAlignmentRecord>(&record)) {
        if (auto e = check_run(m, r->run); !e.empty()) return "gate/up alignment: " + e;
        if (r->linear < 0 || r->linear >= static_cast<int>(m.linears.size()))
            return "gate/up alignment: " + out_of_range("linear", r->linear, m.linears.size());
        if (r->top_channel >= r->channels) return "gate/up alignment: " + out_of_range("top_channel", r->top_channel, std::size_t(r->channels));
    } else if (auto* r = std::get_if<KernelStepRecord>(&record)) {
        if (auto e = check_run(m, r->run); !e.empty()) return "kernel step: " + e;
        if (r->op < 0 || static_cast<std::size_t>(r->op) >= ops) return "kernel step: " + out_of_range("op", r->op, ops);
        if (r->parent < -1 || r->parent >= static_cast<long long>(ops))
            return "kernel step: " + out_of_range("parent", r->parent, ops);
        if (r->count < 1 || r->min_ns > r->max_ns)
            return "kernel step: count " + std::to_string(r->count) + ", min_ns " + std::to_string(r->min_ns) +
                   ", max_ns " + std::to_string(r->max_ns) + " are not the figures of calls";
    } else if (auto* r = std::get_if<RankStepRecord>(&record)) {
        if (r->rank < 0 || r->rank >= m.world_size) return "rank step: " + out_of_range("rank", r->rank, m.world_size);
    } else if (auto* r = std::get_if<OpNameRecord>(&record)) {
        if (r->id < 0 || static_cast<std::size_t>(r->id) != ops)
            return "op name: id " + std::to_string(r->id) + " is not the next id " + std::to_string(ops);
        if (r->name.empty() || r->name.size() > OpNameRecord::kMaxLength)
            return "op name: '" + r->name + "' must have 1 to " + std::to_string(OpNameRecord::kMaxLength) +
                   " characters";
    }
    return {};
}

}  // namespace fp8scope::trace
