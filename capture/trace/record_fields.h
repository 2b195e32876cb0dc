// The field lists of the trace records (trace_records.h), in declaration order: the live
// wire sends the fields in this order, the HDF5 tables, CSV export and the tests'
// comparisons take their columns from here (core/util/field_list.h has the pattern).
// Adding or renaming a field: one line here, plus the version rule of docs/trace-format.md.
#pragma once

#include "fp8/stats_fields.h"
#include "trace_records.h"
#include "util/field_list.h"

namespace fp8scope::trace {

// Name tables keep this many characters (SWMR cannot append variable-length strings).
constexpr std::size_t kRunNameChars = 64;
constexpr std::size_t kNameChars = 128;
static_assert(OpNameRecord::kMaxLength == kNameChars);

}  // namespace fp8scope::trace

namespace fp8scope {

template <fields::Of<LinearInfo> S, class V>
constexpr void visit_fields(S& l, V&& v) {
    v("name", l.name, fields::MaxChars<trace::kNameChars>{});
    v("layer", l.layer);
    v("in_features", l.in_features);
    v("out_features", l.out_features);
}

}  // namespace fp8scope

namespace fp8scope::trace {

// The metadata table an id field indexes (its name is TraceMeta's entry at the id).
enum class NameTable { Runs, Linears, Quantizers, TrainingRecipes, Ops };
struct IdIn {
    NameTable table;
};
// The live protocol version (live_wire.h) that added a field of TraceMeta: a Meta frame of
// an older version ends without it, and a reader of that version keeps the default.
struct WireSince {
    std::uint32_t version;
};

template <fields::Of<RunInfo> S, class V>
constexpr void visit_fields(S& r, V&& v) {
    v("name", r.name, fields::MaxChars<kRunNameChars>{});
    v("recipe", r.recipe, fields::MaxChars<kNameChars>{});
}

template <fields::Of<TraceMeta> S, class V>
constexpr void visit_fields(S& m, V&& v) {
    v("format_version", m.format_version);
    v("tool_version", m.tool_version);
    v("created", m.created);
    v("machine", m.machine);
    v("config_json", m.config_json, fields::FlatName{"config"});
    v("runs", m.runs);
    v("linears", m.linears);
    v("quantizers", m.quantizers);
    v("recipes", m.training_recipes);
    v("ops", m.ops);
    v("capture_every", m.capture_every);
    v("blockmap_every", m.blockmap_every);
    v("rank", m.rank, fields::Since{3}, WireSince{4});
    v("world_size", m.world_size, fields::Since{3}, WireSince{4});
    // An attribute older readers pass over and newer ones read as "" when absent: no new
    // format version (docs/trace-format.md).
    v("grad_dtype", m.grad_dtype, WireSince{5});
    v("baseline_run", m.baseline_run, WireSince{6});  // likewise
    v("precision", m.precision, WireSince{7});         // an optional table: no new format version
    v("injections", m.injections, WireSince{8});       // likewise
    v("kernel_timings", m.kernel_timings, WireSince{9});  // an attribute: as grad_dtype
    v("kernel_window", m.kernel_window, WireSince{9});
}

template <fields::Of<InjectionRecord> S, class V>
constexpr void visit_fields(S& r, V&& v) {
    v("entry", r.entry);
    v("step", r.step);
    v("until", r.until);
    v("layer", r.layer);
    v("linear", r.linear, fields::MaxChars<kNameChars>{});
    v("operand", r.operand, fields::Last<Operand>{Operand::DY});
    v("rows", r.rows);
    v("index", r.index);
    v("scale", r.scale);
}

template <fields::Of<GemmPrecision> S, class V>
constexpr void visit_fields(S& p, V&& v) {
    v("run", p.run, IdIn{NameTable::Runs});
    v("linear", p.linear, IdIn{NameTable::Linears});
    v("gemm", p.gemm, fields::Last<Gemm>{Gemm::Wgrad});
    v("recipe", p.recipe, fields::MaxChars<kNameChars>{});
    v("a", p.a, fields::MaxChars<kNameChars>{});
    v("b", p.b, fields::MaxChars<kNameChars>{});
    v("overridden", p.overridden);
}

template <fields::Of<StepRecord> S, class V>
constexpr void visit_fields(S& s, V&& v) {
    v("run", s.run, IdIn{NameTable::Runs});
    v("step", s.step);
    v("loss", s.loss);
    v("eval_loss", s.eval_loss);
    v("lr", s.lr);
    v("grad_norm", s.grad_norm);
    v("step_ms", s.step_ms, fields::Renamed{"step_time_s", 4});  // was in seconds
    v("tokens_per_s", s.tokens_per_s);
    v("recipe", s.recipe, IdIn{NameTable::TrainingRecipes});
}

template <fields::Of<RankStepRecord> S, class V>
constexpr void visit_fields(S& r, V&& v) {
    v("step", r.step);
    v("rank", r.rank);
    v("compute_ms", r.compute_ms);
    v("comm_ms", r.comm_ms);
    v("step_ms", r.step_ms);
    v("loss", r.loss);
    v("grad_bytes", r.grad_bytes);
    v("grad_error", r.grad_error);
    // FP8 sums against a BF16 shadow sum (engine/fp8_grad_sum_error.h)
    v("grad_snr_db", r.grad_snr_db, fields::Since{6}, WireSince{9});
    v("grad_underflow_pct", r.grad_underflow_pct, fields::Since{6}, WireSince{9});
    v("grad_overflow_pct", r.grad_overflow_pct, fields::Since{6}, WireSince{9});
}

template <fields::Of<EventRecord> S, class V>
constexpr void visit_fields(S& e, V&& v) {
    v("run", e.run, IdIn{NameTable::Runs});
    v("step", e.step);
    v("kind", e.kind, fields::Last<EventKind>{kLastEventKind});
    v("detail", e.detail, fields::MaxChars<kEventDetailChars>{});
}

template <fields::Of<OperandKey> S, class V>
constexpr void visit_fields(S& k, V&& v) {
    v("run", k.run, IdIn{NameTable::Runs});
    v("step", k.step);
    v("linear", k.linear, IdIn{NameTable::Linears});
    v("gemm", k.gemm, fields::Last<Gemm>{Gemm::Wgrad});
    v("operand", k.operand, fields::Last<Operand>{Operand::DY});
}

template <fields::Of<OperandRecord> S, class V>
constexpr void visit_fields(S& o, V&& v) {
    v("key", o.key);
    v("quantizer_in_use", o.quantizer_in_use, IdIn{NameTable::Quantizers}, fields::Renamed{"recipe_in_use", 4});
    v("scale", o.scale);
    v("stats", o.stats);
    v("errors", o.errors);
    v("amax_history", o.amax_history);
}

template <fields::Of<ScalingRecord> S, class V>
constexpr void visit_fields(S& s, V&& v) {
    v("run", s.run, IdIn{NameTable::Runs});
    v("step", s.step);
    v("amax", s.amax);
    v("scale", s.scale);
}

template <fields::Of<BlockMapRecord> S, class V>
constexpr void visit_fields(S& b, V&& v) {
    v("key", b.key);
    v("quantizer", b.quantizer, IdIn{NameTable::Quantizers}, fields::Renamed{"recipe", 4});
    v("rows", b.rows);
    v("cols", b.cols);
    v("tile_rows", b.tile_rows);
    v("tile_cols", b.tile_cols);
    v("grid_rows", b.grid_rows);
    v("grid_cols", b.grid_cols);
    v("absmax", b.absmax);
    v("scale_inv", b.scale_inv);
    v("sqnr_db", b.sqnr_db);
}

template <fields::Of<OpRecord> S, class V>
constexpr void visit_fields(S& o, V&& v) {
    v("run", o.run, IdIn{NameTable::Runs});
    v("step", o.step);
    v("op", o.op, IdIn{NameTable::Ops});
    v("linear", o.linear, IdIn{NameTable::Linears});
    v("layer", o.layer);
    v("device", o.device);
    v("stream", o.stream);
    v("start_ns", o.start_ns);
    v("end_ns", o.end_ns);
    v("kind", o.kind, fields::Last<OpKind>{OpKind::Memset}, fields::Since{2});
    v("parent", o.parent, IdIn{NameTable::Ops}, fields::Since{2});
    v("operand", o.operand, fields::Since{2});
    v("bytes", o.bytes, fields::Since{2});
}

template <fields::Of<GemmErrorRecord> S, class V>
constexpr void visit_fields(S& g, V&& v) {
    v("run", g.run, IdIn{NameTable::Runs});
    v("step", g.step);
    v("linear", g.linear, IdIn{NameTable::Linears});
    v("gemm", g.gemm, fields::Last<Gemm>{Gemm::Wgrad});
    v("sqnr_db", g.sqnr_db);
    v("rel_err", g.rel_err);
    v("max_abs_err", g.max_abs_err);
}

template <fields::Of<KernelStepRecord> S, class V>
constexpr void visit_fields(S& k, V&& v) {
    v("run", k.run, IdIn{NameTable::Runs});
    v("step", k.step);
    v("op", k.op, IdIn{NameTable::Ops});
    v("parent", k.parent, IdIn{NameTable::Ops});
    v("kind", k.kind, fields::Last<OpKind>{OpKind::Memset});
    v("detailed", k.detailed);
    v("count", k.count);
    v("total_ns", k.total_ns);
    v("min_ns", k.min_ns);
    v("max_ns", k.max_ns);
    v("bytes", k.bytes);
}

template <fields::Of<GateUpAlignmentRecord> S, class V>
constexpr void visit_fields(S& a, V&& v) {
    v("run", a.run, IdIn{NameTable::Runs});
    v("step", a.step);
    v("linear", a.linear, IdIn{NameTable::Linears});
    v("channels", a.channels);
    v("mean_abs_cos", a.mean_abs_cos);
    v("p99_abs_cos", a.p99_abs_cos);
    v("max_abs_cos", a.max_abs_cos);
    v("aligned", a.aligned);
    v("top_channel", a.top_channel);
    v("top_cos", a.top_cos);
    v("top_norm_product", a.top_norm_product);
    v("top_down_amax", a.top_down_amax);
    v("down_amax_median", a.down_amax_median);
}

template <fields::Of<OpNameRecord> S, class V>
constexpr void visit_fields(S& n, V&& v) {
    v("id", n.id);
    v("name", n.name, fields::MaxChars<OpNameRecord::kMaxLength>{});
}

}  // namespace fp8scope::trace
