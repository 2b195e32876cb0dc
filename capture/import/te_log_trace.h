// Transformer Engine statistics logs (te_log.h) as a standard fp8scope trace, so that every
// view reads them as it reads a run the engine recorded: one run per log file (rank), one
// linear per TE layer, the operands x, w and dy from TE's activation, weight and gradient,
// the logged iterations as capture steps. Every logged value also goes verbatim, with its
// file and line, to /meta/te_log (te_log_table.h). Mapping and layout: docs/te-log-import.md.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "te_log.h"
#include "te_log_table.h"
#include "trace_records.h"

namespace fp8scope::te_log {

// The quantizer of a statistic without a recipe prefix: the recipe the run trained with,
// which the statistics log does not name.
inline constexpr const char* kInUseQuantizer = "recipe_in_use";

// The trace's metadata; the records and the raw tables follow from the log.
struct Converted {
    trace::TraceMeta meta;
    std::vector<std::int32_t> linear_of_layer;  // Log::layers -> /meta/linears
    std::vector<StatName> stat_names;            // Log::stats, parsed
};
// Throws std::runtime_error when there is nothing to import or a layer name is longer
// than the trace keeps (128 characters).
Converted convert(const Log& log, const std::string& tool_version);

// The trace records of `log`, one run and logged iteration at a time (steps ascending):
// a start event per run, then per step its step record, operand records and scaling row.
// Memory holds one iteration's figures, never the whole log's.
void write_records(const Log& log, const Converted& c, trace::RecordSink& sink);

struct ImportCounts {
    std::size_t runs = 0, linears = 0, steps = 0, operands = 0, values = 0;
    std::int64_t first_step = 0, last_step = 0;
};
// Writes the trace to `out` (a temporary file renamed at the end: `out` is never left
// half written). Throws trace::TraceError or std::runtime_error naming the file.
ImportCounts write_trace(const Log& log, const Converted& c, const std::string& out);

}  // namespace fp8scope::te_log
