// /meta/te_log: every value of the Transformer Engine statistics logs a trace was imported
// from, with its file and line, so nothing of the logs is lost (statistics without a trace
// figure, unknown ones, overwritten ones). Added to the closed trace, as /meta/attribution
// is. Columns: docs/te-log-import.md.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "te_log.h"

namespace fp8scope::te_log {

inline constexpr const char* kValuesTable = "/meta/te_log";       // a row per logged value
inline constexpr const char* kStatsTable = "/meta/te_log_stats";  // the stat names rows refer to
inline constexpr const char* kFilesTable = "/meta/te_log_files";  // the log files rows refer to

struct RawRow {
    std::int32_t run = 0;      // /meta/runs
    std::int64_t step = 0;     // the logged iteration
    std::int32_t linear = -1;  // /meta/linears; -1: the metric holds no tensor name
    std::int8_t tensor = -1;   // Tensor: 0 activation, 1 weight, 2 gradient, 3 output, 4 wgrad, 5 dgrad; -1 none
    std::int32_t stat = 0;     // /meta/te_log_stats
    double value = 0;          // as printed in the log (4 decimals)
    std::int32_t file = 0;     // /meta/te_log_files
    std::int64_t line = 0;     // 1-based
};
struct RawTable {
    std::vector<RawRow> rows;
    std::vector<std::string> stats, files;
};

// Adds the tables of `log`'s values to the closed trace at `path`; layers map to linears
// through `linear_of_layer`. Throws std::runtime_error (a metric name or path longer than
// the tables keep) or h5::Error naming the file.
void write_raw_tables(const std::string& path, const Log& log, const std::vector<std::int32_t>& linear_of_layer);

// The raw tables of a trace; empty when it has none (any trace not imported from TE logs).
RawTable read_raw_table(const std::string& path);

}  // namespace fp8scope::te_log
