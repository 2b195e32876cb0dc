// The HDF5 layout of a trace (docs/trace-format.md), shared by the writer and the reader:
// dataset paths and the column list of every table. A table's columns are the scalar
// fields of the records it holds (record_fields.h, stats_fields.h) plus its own (offset,
// count) columns into flat datasets; h5_columns.h turns a list into the compound type and
// the record <-> row copies. One definition for both sides, so the writer cannot write a
// column the reader does not know.
#pragma once

#include <cstdint>
#include <string>
#include <tuple>

#include "h5_columns.h"
#include "record_fields.h"

namespace fp8scope::trace::schema {

inline constexpr const char* kFormatName = "fp8scope-trace";

// Dataset paths.
inline constexpr const char* kRuns = "/meta/runs";
inline constexpr const char* kLinears = "/meta/linears";
inline constexpr const char* kQuantizers = "/meta/quantizers";
inline constexpr const char* kRecipes = "/meta/recipes";  // the training recipes
// Before format 4 the quantizers were /meta/recipes and the training recipes
// /meta/training_recipes.
inline constexpr const char* kQuantizersBefore4 = "/meta/recipes";
inline constexpr const char* kRecipesBefore4 = "/meta/training_recipes";
inline constexpr const char* kOps = "/meta/ops";  // appendable: kernel names arrive late
inline constexpr const char* kGemmNames = "/meta/gemms";
inline constexpr const char* kOperandNames = "/meta/operands";
inline constexpr const char* kEventKinds = "/meta/event_kinds";
inline constexpr const char* kSteps = "/steps";
inline constexpr const char* kEvents = "/events";
inline constexpr const char* kScalingIndex = "/scaling/index";
inline constexpr const char* kScalingAmax = "/scaling/amax";
inline constexpr const char* kScalingScale = "/scaling/scale";
inline constexpr const char* kOperands = "/operands/table";
inline constexpr const char* kOperandErrors = "/operands/errors";
inline constexpr const char* kOperandHistogram = "/operands/histogram";
inline constexpr const char* kOperandChannelAbsmax = "/operands/channel_absmax";
inline constexpr const char* kOperandTop = "/operands/top";
inline constexpr const char* kOperandAmaxHistory = "/operands/amax_history";
inline constexpr const char* kBlockMaps = "/blockmaps/table";
inline constexpr const char* kBlockAbsmax = "/blockmaps/absmax";
inline constexpr const char* kBlockScaleInv = "/blockmaps/scale_inv";
inline constexpr const char* kBlockSqnr = "/blockmaps/sqnr_db";
inline constexpr const char* kOpTimes = "/ops";
inline constexpr const char* kKernelSteps = "/kernel_steps";  // since format 6
inline constexpr const char* kGateUpAlignment = "/gate_up_alignment";  // since format 7
inline constexpr const char* kRanks = "/ranks";  // since format 3; older files have none
inline constexpr const char* kGemmErrors = "/gemm_error";  // optional: older files have none
inline constexpr const char* kPrecision = "/meta/precision";  // optional: older files have none
inline constexpr const char* kInjections = "/meta/injections";  // optional: older files have none

// Where an operand row's vectors went: (offset, count) into the flat datasets.
struct OperandSpans {
    std::int32_t hist_min_exp = 0;  // exponent of the first stored histogram bin
    std::uint64_t hist_offset = 0, hist_count = 0;
    std::uint64_t errors_offset = 0, errors_count = 0;
    std::uint64_t channel_offset = 0, channel_count = 0;
    std::uint64_t top_offset = 0, top_count = 0;
    std::uint64_t history_offset = 0, history_count = 0;
};
template <fields::Of<OperandSpans> S, class V>
void visit_fields(S& s, V&& v) {
    v("hist_min_exp", s.hist_min_exp);
    v("hist_offset", s.hist_offset);
    v("hist_count", s.hist_count);
    v("errors_offset", s.errors_offset);
    v("errors_count", s.errors_count);
    v("channel_offset", s.channel_offset);
    v("channel_count", s.channel_count);
    v("top_offset", s.top_offset);
    v("top_count", s.top_count);
    v("history_offset", s.history_offset);
    v("history_count", s.history_count);
}

// A block map's three maps share one (offset, count).
struct BlockMapSpan {
    std::uint64_t offset = 0, count = 0;
};
template <fields::Of<BlockMapSpan> S, class V>
void visit_fields(S& s, V&& v) {
    v("offset", s.offset);
    v("count", s.count);
}

// --- tables: the objects a row holds and its columns, in file order -------------------

// A row per record, its scalar fields as columns.
template <class R>
struct RecordTable {
    using Objects = std::tuple<R>;
    template <class V, class S>
    static void columns(V&& v, S& r) { fields::visit_scalars(r, v); }
};
using RunTable = RecordTable<RunInfo>;
using LinearTable = RecordTable<LinearInfo>;
using StepTable = RecordTable<StepRecord>;
using EventTable = RecordTable<EventRecord>;
using ScalingIndexTable = RecordTable<ScalingRecord>;  // run, step; amax and scale apart
using TopTable = RecordTable<TopValue>;
using OpTable = RecordTable<OpRecord>;
using RankTable = RecordTable<RankStepRecord>;
using KernelStepTable = RecordTable<KernelStepRecord>;
using GemmErrorTable = RecordTable<GemmErrorRecord>;
using GateUpAlignmentTable = RecordTable<GateUpAlignmentRecord>;
using KeyTable = RecordTable<OperandKey>;  // the key columns alone, for indexing
using PrecisionTable = RecordTable<GemmPrecision>;
using InjectionTable = RecordTable<InjectionRecord>;

// /meta/quantizers, /meta/ops, ...: one name per row.
struct NamesTable {
    using Objects = std::tuple<std::string>;
    template <class V, class S>
    static void columns(V&& v, S& name) { v("name", name, fields::MaxChars<kNameChars>{}); }
};

// The statistics of one operand at one capture step; its vectors are in flat datasets.
struct OperandTable {
    using Objects = std::tuple<OperandRecord, OperandSpans>;
    template <class V, class O, class S>
    static void columns(V&& v, O& o, S& spans) {
        fields::visit_scalars(o.key, v);
        fields::visit_scalars(o, v);                 // quantizer_in_use, scale
        fields::visit_scalars(o.stats, v);           // counts, amax, moments, dynamic range
        fields::visit_scalars(o.stats.outliers, v);  // the outlier figures and their k
        fields::visit_scalars(o.stats.histogram, h5::with_prefix("hist_", v));
        fields::visit_scalars(spans, v);
    }
};

// One row per quantizer of /meta/quantizers: its id, then ErrorStats (its name is in the
// meta).
struct ErrorTable {
    using Objects = std::tuple<std::int32_t, ErrorStats>;
    template <class V, class I, class E>
    static void columns(V&& v, I& quantizer, E& e) {
        v("quantizer", quantizer, fields::Renamed{"recipe", 4});
        fields::visit_scalars(e, v);  // the quantizer name is a string without a width: no column
    }
};

struct BlockMapTable {
    using Objects = std::tuple<BlockMapRecord, BlockMapSpan>;
    template <class V, class B, class S>
    static void columns(V&& v, B& b, S& span) {
        fields::visit_scalars(b.key, v);
        fields::visit_scalars(b, v);
        fields::visit_scalars(span, v);
    }
};

// The layout of a table's rows (packed: the file's own type).
template <class Table>
h5::Layout layout() {
    return h5::make_layout([](auto& v) {
        typename Table::Objects objects{};
        std::apply([&](auto&... o) { Table::columns(v, o...); }, objects);
    });
}

// A table's columns copied from its objects into a row, and back.
template <class Table, class... O>
void put_row(unsigned char* row, const O&... objects) {
    h5::Put<h5::Packing::Packed> put(row);
    Table::columns(put, objects...);
}
template <class Table, class... O>
void get_row(const unsigned char* row, O&... objects) {
    h5::Get<h5::Packing::Packed> get(row);
    Table::columns(get, objects...);
}

}  // namespace fp8scope::trace::schema
