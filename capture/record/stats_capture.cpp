// StatsCapture: the figures of each captured operand, computed where the model hands it
// over (its values are only valid during the call), then queued as records.
#include "stats_capture.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernel_recorder.h"

#include "fp8/precision_plan.h"
#include "fp8/training_recipe.h"
#include "fp8/stats.h"
#include "stats/gate_up_alignment.h"

namespace fp8scope::trace {

OpNames::OpNames(const std::vector<std::string>& known) {
    for (std::size_t i = 0; i < known.size(); ++i) ids_.emplace(known[i], static_cast<std::int32_t>(i));
}

std::int32_t OpNames::id(std::string_view name, RecordSink& sink) {
    // Kernel names (templated CUDA kernels) can be far longer than the trace keeps: the
    // prefix names them, and names that share it share an id.
    if (name.empty()) name = "?";
    name = name.substr(0, OpNameRecord::kMaxLength);
    std::lock_guard lock(mu_);
    auto it = ids_.find(std::string(name));
    if (it != ids_.end()) return it->second;
    auto id = static_cast<std::int32_t>(ids_.size());
    sink.write(OpNameRecord{id, std::string(name)});
    ids_.emplace(std::string(name), id);
    return id;
}

std::vector<std::string> default_op_names() {
    return {"fprop",     "dgrad",   "wgrad",  "quantize", "smooth_swiglu", "embedding", "layernorm",
            "rmsnorm",   "attention", "gelu", "swiglu",   "head",          "softmax_ce", "capture", "optimizer",
            "eval",      "nonfinite", "rope"};
}

std::vector<std::string> trace_recipe_names(const std::vector<Recipe>& analysis,
                                            const std::vector<std::string>& runs) {
    std::vector<std::string> names;
    auto add = [&](const Recipe& r) {
        std::string n = recipe_name(r);
        if (std::find(names.begin(), names.end(), n) == names.end()) names.push_back(n);
    };
    for (const Recipe& r : analysis) add(r);
    std::vector<std::string> training = training_recipe_names();
    training.insert(training.end(), runs.begin(), runs.end());
    for (const std::string& t : training) {
        TrainingRecipe tr = training_recipe(t);
        for (Operand o : {Operand::X, Operand::W, Operand::DY})
            if (const auto& r = tr.operand(o)) {
                add(*r);
                add(rowwise_quantizer(*r));  // what a rowwise copy is cast with
            }
    }
    return names;
}

StatsCapture::StatsCapture(int run, const TraceMeta& meta, RecordSink& sink, OpNames& ops, StatsCaptureOptions options)
    : run_(run), meta_(meta), sink_(sink), ops_(ops), options_(options) {
    for (const auto& n : meta.quantizers) recipes_.push_back(parse_recipe(n));
    const auto& L = meta.linears;
    for (std::size_t f1 = 0; f1 < L.size(); ++f1) {
        const std::string& n = L[f1].name;
        if (!n.ends_with("mlp.fc1")) continue;
        const std::string fc2 = n.substr(0, n.size() - 1) + "2";
        for (std::size_t f2 = 0; f2 < L.size(); ++f2)
            if (L[f2].name == fc2 && L[f1].out_features == 2 * L[f2].in_features && L[f2].in_features > 0) {
                swiglu_fc1_of_fc2_[int(f2)] = int(f1);
                swiglu_fc2_of_fc1_[int(f1)] = int(f2);
            }
    }
    for (std::size_t i = 0; i < recipes_.size(); ++i)
        if (!columnwise_is_transpose(recipes_[i])) {
            oriented_.push_back(i);
            oriented_recipes_.push_back(recipes_[i]);
        }
}

int StatsCapture::recipe_id(const Recipe* r) const {
    if (!r) return -1;
    std::string n = recipe_name(*r);
    auto it = std::find(meta_.quantizers.begin(), meta_.quantizers.end(), n);
    return it == meta_.quantizers.end() ? -1 : static_cast<int>(it - meta_.quantizers.begin());
}

void StatsCapture::begin_step(std::int64_t step, bool full, bool blockmaps) {
    end_step();
    step_errors_.clear();
    step_ = step;
    full_ = full;
    blockmaps_ = blockmaps;
}

void StatsCapture::end_step() {
    for (auto& [fc1, a] : alignment_) sink_.write(std::move(a));
    alignment_.clear();
    if (!pending_) return;
    pending_ = false;
    sink_.write(std::move(scaling_));
    scaling_ = {};
}

namespace {

// The per-tensor scale a recipe uses for this cast; NaN for block recipes.
float scale_in_use(const Recipe* r, const DelayedState* delayed, float amax) {
    if (!r) return std::numeric_limits<float>::quiet_NaN();
    if (auto* c = std::get_if<CurrentScaling>(r)) return compute_scale(amax, c->format, c->eps, c->pow2);
    if (std::holds_alternative<DelayedScaling>(*r)) return delayed ? delayed->scale() : 1.0f;
    return std::numeric_limits<float>::quiet_NaN();
}

}  // namespace

void StatsCapture::note_scaling(int slot, float amax, float scale) {
    if (!pending_) {
        std::size_t slots = meta_.linears.size() * kOperandsPerLinear;
        scaling_.run = run_;
        scaling_.step = step_;
        scaling_.amax.assign(slots, std::numeric_limits<float>::quiet_NaN());
        scaling_.scale.assign(slots, std::numeric_limits<float>::quiet_NaN());
        pending_ = true;
    }
    if (slot >= 0 && static_cast<std::size_t>(slot) < scaling_.amax.size()) {
        scaling_.amax[slot] = amax;
        scaling_.scale[slot] = scale;
    }
}

void StatsCapture::on_scaling(const OperandScaling& s) {
    // The operand's two GEMMs cast the same tensor (the second one transposed).
    for (Gemm g : {Gemm::Fprop, Gemm::Dgrad, Gemm::Wgrad})
        if (const int slot = operand_slot(s.linear, g, s.operand); slot >= 0 && (!s.gemm || *s.gemm == g))
            note_scaling(slot, s.cast.amax, s.cast.scale);
}

void StatsCapture::on_operand(const OperandCapture& c) {
    const int slot = operand_slot(c.linear, c.gemm, c.operand);
    if (slot < 0) return;
    if (!full_) {
        const float amax = c.analysis->scaling_amax(c.values);
        note_scaling(slot, amax, scale_in_use(c.recipe, c.delayed, amax));
        return;
    }

    OperandRecord rec;
    rec.key = {run_, step_, c.linear, c.gemm, c.operand};
    // A GEMM that reads the operand's rowwise copy (fprop X and W, dgrad dY) sees it cast
    // without the columnwise copy's Hadamard transform.
    const bool columnwise = operand_gemms(c.operand).second == c.gemm;
    const std::optional<Recipe> rowwise = c.recipe && !columnwise ? std::optional(rowwise_quantizer(*c.recipe)) : std::nullopt;
    rec.quantizer_in_use = recipe_id(rowwise ? &*rowwise : c.recipe);
    const auto key = std::make_pair(c.linear, static_cast<int>(c.operand));
    const auto earlier = c.transposed_repeat && !blockmaps_ ? step_errors_.find(key) : step_errors_.end();
    Analysis a;
    if (earlier == step_errors_.end()) {
        // Delayed scaling depends on its history: the recipe in use is judged with the
        // scale training really cast with; other delayed entries are what-if first steps.
        AnalysisExtras extras;
        extras.tile_maps = blockmaps_;
        if (c.recipe && c.delayed && std::holds_alternative<DelayedScaling>(*c.recipe) && rec.quantizer_in_use >= 0) {
            extras.delayed_scales.assign(recipes_.size(), std::numeric_limits<float>::quiet_NaN());
            extras.delayed_scales[rec.quantizer_in_use] = c.delayed->scale();
        }
        a = c.analysis->analyze(c.values, recipes_, options_.stats, extras);
        rec.errors = std::move(a.errors);
        if (!c.transposed_repeat) step_errors_[key] = rec.errors;
        if (blockmaps_) record_blockmaps(c, a.maps);
    } else {
        // Per-tensor and square-block casts of a transpose are the transposed casts, with
        // the same figures: only the recipes whose blocks follow the orientation run again.
        a = c.analysis->analyze(c.values, oriented_recipes_, options_.stats, {});
        rec.errors = earlier->second;
        for (std::size_t i = 0; i < oriented_.size(); ++i) rec.errors[oriented_[i]] = std::move(a.errors[i]);
    }
    rec.stats = std::move(a.tensor);
    if (c.gemm == Gemm::Fprop && c.operand == Operand::W && swiglu_fc2_of_fc1_.contains(c.linear)) record_alignment(c);
    if (c.gemm == Gemm::Fprop && c.operand == Operand::X && swiglu_fc1_of_fc2_.contains(c.linear))
        add_down_amax(c.linear, rec.stats.outliers.channel_absmax);
    const float scale = scale_in_use(c.recipe, c.delayed, a.scaling_amax);
    rec.scale = scale;
    note_scaling(slot, a.scaling_amax, scale);
    if (c.delayed) {
        const auto& h = c.delayed->history();
        rec.amax_history.assign(h.begin(), h.end());
    }
    sink_.write(std::move(rec));
}

void StatsCapture::record_alignment(const OperandCapture& c) {
    // fc1's weight (2H, C) as this step's fprop read it: rows j and H + j are channel j's
    // gate and up rows (engine/model_impl.h).
    const std::int64_t H = c.values.rows / 2, C = c.values.cols;
    const std::vector<float> w = c.analysis->host_values(c.values);
    const stats::GateUpAlignment s = stats::gate_up_alignment(w.data(), H, C);
    alignment_[c.linear] = {.run = run_, .step = step_, .linear = c.linear, .channels = s.channels,
                            .mean_abs_cos = s.mean_abs_cos, .p99_abs_cos = s.p99_abs_cos, .max_abs_cos = s.max_abs_cos,
                            .aligned = s.aligned, .top_channel = s.top_channel, .top_cos = s.top_cos,
                            .top_norm_product = s.top_norm_product};
}

void StatsCapture::add_down_amax(int fc2, const std::vector<float>& channel_absmax) {
    const auto it = alignment_.find(swiglu_fc1_of_fc2_.at(fc2));
    if (it == alignment_.end() || channel_absmax.empty()) return;
    GateUpAlignmentRecord& r = it->second;
    if (r.top_channel >= 0 && std::size_t(r.top_channel) < channel_absmax.size())
        r.top_down_amax = channel_absmax[std::size_t(r.top_channel)];
    std::vector<float> v = channel_absmax;
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    r.down_amax_median = n % 2 ? v[n / 2] : 0.5 * (double(v[n / 2 - 1]) + v[n / 2]);
}

void StatsCapture::on_gemm_output(const GemmOutputCapture& c) {
    if (!full_) return;
    const OutputError e = c.analysis->output_error(c.output, c.reference);
    sink_.write(GemmErrorRecord{run_, step_, c.linear, c.gemm, e.sqnr_db(), e.rel_err(), double(e.max_abs)});
}

void StatsCapture::record_blockmaps(const OperandCapture& c, const TileMaps& maps) {
    for (std::size_t i = 0; i < recipes_.size(); ++i) {
        if (std::holds_alternative<DelayedScaling>(recipes_[i])) continue;  // a what-if without history
        BlockMapRecord b = block_map_record(c.values.rows, c.values.cols, maps, i);
        b.key = {run_, step_, c.linear, c.gemm, c.operand};
        b.quantizer = static_cast<std::int32_t>(i);
        sink_.write(std::move(b));
    }
}

void StatsCapture::on_op(const OpTiming& t) {
    OpRecord r;
    r.run = run_;
    r.step = step_;
    r.op = ops_.id(t.op, sink_);
    r.linear = t.linear;
    r.layer = t.layer;
    r.start_ns = t.start_ns;
    r.end_ns = t.end_ns;
    r.operand = t.operand;
    if (kernels_ && t.scope) kernels_->note_scope(t.scope, r, t.scope_end);
    sink_.write(r);
}

BlockMapRecord block_map_record(std::int64_t rows, std::int64_t cols, const TileMaps& maps, std::size_t recipe) {
    BlockMapRecord b;
    b.rows = rows;
    b.cols = cols;
    b.tile_rows = maps.tile_rows;
    b.tile_cols = maps.tile_cols;
    b.grid_rows = maps.grid_rows;
    b.grid_cols = maps.grid_cols;
    b.absmax = maps.absmax;
    const TileMap& m = maps.recipes.at(recipe);
    b.scale_inv = m.scale_inv;
    b.sqnr_db.resize(m.signal.size());
    for (std::size_t i = 0; i < m.signal.size(); ++i)
        b.sqnr_db[i] = m.signal[i] == 0 ? std::numeric_limits<float>::quiet_NaN()
                       : m.error[i] == 0 ? std::numeric_limits<float>::infinity()
                                         : static_cast<float>(10.0 * std::log10(m.signal[i] / m.error[i]));
    return b;
}

}  // namespace fp8scope::trace
