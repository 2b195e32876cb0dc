// Merging trace metadata and renumbering records.
#include "models/trace_merge.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace fp8scope::views {

namespace {

// The index of `name` in `names`, appended when absent.
int id_of(std::vector<std::string>& names, const std::string& name) {
    auto it = std::find(names.begin(), names.end(), name);
    if (it != names.end()) return static_cast<int>(it - names.begin());
    names.push_back(name);
    return static_cast<int>(names.size()) - 1;
}

std::vector<int> map_names(std::vector<std::string>& merged, const std::vector<std::string>& part) {
    std::vector<int> out;
    for (const auto& n : part) out.push_back(id_of(merged, n));
    return out;
}

int mapped(const std::vector<int>& map, int id) {
    return id >= 0 && id < static_cast<int>(map.size()) ? map[static_cast<std::size_t>(id)] : id;
}

// Unites `part`'s linears into `merged` by name; returns part id -> merged id.
std::vector<int> map_linears(std::vector<LinearInfo>& merged, const std::vector<LinearInfo>& part,
                             std::vector<char>& shapes_differ) {
    std::vector<int> out;
    for (const LinearInfo& l : part) {
        auto it = std::find_if(merged.begin(), merged.end(), [&](const LinearInfo& m) { return m.name == l.name; });
        if (it == merged.end()) {
            merged.push_back(l);
            shapes_differ.push_back(0);
            it = merged.end() - 1;
        } else if (it->in_features != l.in_features || it->out_features != l.out_features) {
            shapes_differ[static_cast<std::size_t>(it - merged.begin())] = 1;
        }
        out.push_back(static_cast<int>(it - merged.begin()));
    }
    return out;
}

// A per-slot array in merged slots: NaN where the part has no such operand.
std::vector<float> remap_slots(const std::vector<float>& part, const std::vector<int>& linear, std::size_t merged_slots) {
    std::vector<float> out(merged_slots, NAN);
    for (std::size_t s = 0; s < part.size(); ++s) {
        const std::size_t l = s / trace::kOperandsPerLinear;
        if (l >= linear.size()) break;  // a damaged row's excess: the store would drop it too
        out[static_cast<std::size_t>(linear[l]) * trace::kOperandsPerLinear + s % trace::kOperandsPerLinear] = part[s];
    }
    return out;
}

ErrorStats not_computed(const std::string& quantizer) {
    ErrorStats e;
    e.recipe = quantizer;
    for (double* v : {&e.amax, &e.mse, &e.sqnr_db, &e.rel_l2, &e.max_abs_err, &e.cosine, &e.underflow_pct,
                      &e.overflow_pct, &e.scale_inv_min, &e.scale_inv_max})
        *v = NAN;
    return e;
}

}  // namespace

TraceMerge::TraceMerge(std::vector<Part> parts) {
    if (parts.empty()) return;
    meta_ = parts.front().meta;
    if (parts.size() == 1) {  // its ids are the merged ids: remap() passes batches through
        maps_.resize(1);
        maps_[0].rank = meta_.rank;
        shapes_differ_.assign(meta_.linears.size(), 0);
        return;
    }
    meta_.runs.clear();
    meta_.quantizers.clear();
    meta_.training_recipes.clear();
    meta_.ops.clear();
    meta_.linears.clear();
    meta_.baseline_run = -1;  // the first part's with one
    for (const Part& p : parts) {
        IdMap m;
        m.first_run = static_cast<int>(meta_.runs.size());
        m.rank = p.meta.rank;
        if (const int base = trace::baseline_of(p.meta); base >= 0 && meta_.baseline_run < 0)
            meta_.baseline_run = m.first_run + base;
        for (const auto& r : p.meta.runs) meta_.runs.push_back({p.name.toStdString() + ": " + r.name, r.recipe});
        m.quantizer = map_names(meta_.quantizers, p.meta.quantizers);
        m.training_recipe = map_names(meta_.training_recipes, p.meta.training_recipes);
        m.op = map_names(meta_.ops, p.meta.ops);
        m.linear = map_linears(meta_.linears, p.meta.linears, shapes_differ_);
        maps_.push_back(std::move(m));
    }
    announced_ops_ = meta_.ops.size();
    for (IdMap& m : maps_) {
        m.same_linears = m.linear.size() == meta_.linears.size();
        for (std::size_t l = 0; l < m.linear.size(); ++l) m.same_linears = m.same_linears && m.linear[l] == static_cast<int>(l);
    }
}

std::vector<RankRun> TraceMerge::rankRuns() const {
    std::vector<RankRun> out;
    for (std::size_t p = 0; p < maps_.size(); ++p) {
        const int end = p + 1 < maps_.size() ? maps_[p + 1].first_run : static_cast<int>(meta_.runs.size());
        for (int r = maps_[p].first_run; r < end; ++r) out.push_back({maps_[p].rank, r - maps_[p].first_run});
    }
    return out;
}

bool TraceMerge::shapesDiffer(int linear) const {
    return linear >= 0 && linear < static_cast<int>(shapes_differ_.size()) && shapes_differ_[static_cast<std::size_t>(linear)];
}

int TraceMerge::opId(const std::string& name) { return id_of(meta_.ops, name); }

void TraceMerge::remap(std::size_t part, TraceBatch& b) {
    if (part >= maps_.size()) throw std::out_of_range("TraceMerge: no such part");
    if (maps_.size() == 1) return;
    IdMap& m = maps_[part];
    // Kernel names first: op records refer to them. Ids are handed out in order (the store
    // ignores one that skips), so the part's new name gets the next merged id.
    for (const auto& n : b.op_names) {
        if (n.id != static_cast<std::int32_t>(m.op.size())) continue;
        m.op.push_back(opId(n.name));
    }
    b.op_names.clear();
    for (; announced_ops_ < meta_.ops.size(); ++announced_ops_)
        b.op_names.push_back({static_cast<std::int32_t>(announced_ops_), meta_.ops[announced_ops_]});

    if (b.replace)
        for (auto& run : b.replace->runs) run += m.first_run;
    for (auto& s : b.steps) {
        s.run += m.first_run;
        s.recipe = mapped(m.training_recipe, s.recipe);
    }
    const std::size_t slot_count = meta_.linears.size() * trace::kOperandsPerLinear;
    for (auto& s : b.scaling) {
        s.run += m.first_run;
        if (m.same_linears) continue;
        s.amax = remap_slots(s.amax, m.linear, slot_count);
        s.scale = remap_slots(s.scale, m.linear, slot_count);
    }
    for (auto& p : b.scaling_points) {
        p.run += m.first_run;
        if (m.same_linears) continue;
        std::vector<std::vector<trace::SlotPoint>> merged(slot_count);
        for (std::size_t s = 0; s < p.by_slot.size(); ++s) {
            const std::size_t l = s / trace::kOperandsPerLinear;
            if (l >= m.linear.size()) break;
            merged[static_cast<std::size_t>(m.linear[l]) * trace::kOperandsPerLinear + s % trace::kOperandsPerLinear] =
                std::move(p.by_slot[s]);
        }
        p.by_slot = std::move(merged);
    }
    for (auto& o : b.operands) {
        o.key.run += m.first_run;
        o.key.linear = mapped(m.linear, o.key.linear);
        o.quantizer_in_use = mapped(m.quantizer, o.quantizer_in_use);
        if (o.errors.empty()) continue;
        std::vector<ErrorStats> errors;
        for (const auto& name : meta_.quantizers) errors.push_back(not_computed(name));
        for (std::size_t i = 0; i < o.errors.size() && i < m.quantizer.size(); ++i)
            errors[static_cast<std::size_t>(m.quantizer[i])] = std::move(o.errors[i]);
        o.errors = std::move(errors);
    }
    for (auto& bm : b.blockmaps) {
        bm.key.run += m.first_run;
        bm.key.linear = mapped(m.linear, bm.key.linear);
        bm.quantizer = mapped(m.quantizer, bm.quantizer);
    }
    for (auto& op : b.ops) {
        op.run += m.first_run;
        op.op = mapped(m.op, op.op);
        op.parent = mapped(m.op, op.parent);
        op.linear = mapped(m.linear, op.linear);
    }
    for (auto* sums : {&b.kernel_steps, &b.kernel_steps_decimated})
        for (auto& k : *sums) {
            k.run += m.first_run;
            k.op = mapped(m.op, k.op);
            k.parent = mapped(m.op, k.parent);
        }
    for (auto& k : b.kernel_record_steps) k.run += m.first_run;
    for (auto& a : b.gate_up) {
        a.run += m.first_run;
        a.linear = mapped(m.linear, a.linear);
    }
    for (auto& e : b.events)
        if (e.run >= 0) e.run += m.first_run;
    // One job's ranks: the merged meta is the first trace's, and so are the Health view's.
    if (part > 0) {
        b.ranks.clear();
        b.ranks_decimated.clear();
    }
}

}  // namespace fp8scope::views
