// Reading Transformer Engine's precision debug logs: the statistics files that
// nvidia-dlframework-inspect (nvdlfw_inspect) writes for TE's LogTensorStats,
// LogFp8TensorStats and LogNvfp4TensorStats features, one per rank:
//
//   LOG_DIR/nvdlfw_inspect_statistics_logs/nvdlfw_inspect_globalrank-0.log
//   2025-06-10 12:00:01,123 - INFO - decoder.1.mlp.fc1_activation_cur_amax \t\t\t\t iteration=000002 \t\t\t\t value=4.3188
//
// A metric is LAYER_TENSOR_STAT (nvdlfw_inspect's MetricLogger.log_scalar of
// f"{layer_name}_{tensor_name}_{stat}"); the value is printed with 4 decimals. The exact
// layout, the stat names and the versions checked are in docs/te-log-import.md.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace fp8scope::te_log {

// TE's tensor names (LogTensorStats also logs the GEMM outputs: output, wgrad, dgrad).
enum class Tensor : std::int8_t { Activation, Weight, Gradient, Output, Wgrad, Dgrad };
constexpr int kTensorCount = 6;
std::string_view tensor_name(Tensor t);  // "activation", ...

// What a statistic's name says. Quantized statistics are [RECIPE_]STAT[_columnwise].
enum class StatKind : std::int8_t {
    Unknown,
    Min, Max, Mean, Std, L1Norm, L2Norm, CurAmax, DynamicRange,
    BlockwiseDynamicRange,  // max_blockwise_dynamic_range_block_size_B_dims_D[_max_over_orientations]
    Underflows, Overflows, ScaleInvMin, ScaleInvMax, Mse,  // underflows%, overflows%, ...
};
struct StatName {
    StatKind kind = StatKind::Unknown;
    std::string recipe;       // "" for the recipe in use, else fp8_delayed_scaling, mxfp8, ...
    bool columnwise = false;  // the transposed copy (TE's _columnwise suffix)
    bool quantized() const { return kind >= StatKind::Underflows; }
};
StatName parse_stat(std::string_view stat);

// A metric name split at its tensor name: LAYER_TENSOR_STAT. tensor is empty when the
// name holds none of TE's tensor names; then layer is empty and stat the whole name.
struct MetricName {
    std::string layer;
    std::optional<Tensor> tensor;
    std::string stat;
};
MetricName split_metric(std::string_view metric);

// A place in a log: reported as "FILE:LINE: problem".
struct Issue {
    std::string file;
    std::int64_t line = 0;
    std::string problem;
    std::string str() const { return file + ":" + std::to_string(line) + ": " + problem; }
};

// Malformed lines, all of them (every one named with its file and line).
class LogError : public std::runtime_error {
public:
    explicit LogError(std::vector<Issue> issues);
    const std::vector<Issue>& issues() const { return issues_; }

private:
    std::vector<Issue> issues_;
};

struct LogFile {
    std::string path;
    int rank = -1;  // from nvdlfw_inspect_globalrank-N.log; -1 when the name does not say
};

// One logged value. Names are interned: layer and stat index Log::layers and Log::stats.
struct Value {
    std::int32_t file = 0;
    std::int64_t line = 0;
    std::int32_t layer = -1;  // -1: the metric holds no tensor name
    std::int8_t tensor = -1;  // Tensor, -1 none
    std::int32_t stat = 0;
    std::int64_t iteration = 0;
    double value = 0;
};

struct Log {
    std::vector<LogFile> files;
    std::vector<std::string> layers;  // in order of first appearance
    std::vector<std::string> stats;   // likewise; the whole metric name where no tensor was found
    std::vector<Value> values;        // in file, then line order
    // Lines kept in the raw table but not in a figure (an unknown statistic or tensor).
    std::vector<Issue> warnings;
    // Lines skipped: an incomplete last line (a log still being written).
    std::vector<Issue> notices;
};

// The statistics logs named by `inputs`: a file is taken as it is; a directory is searched
// (recursively) for nvdlfw_inspect*_globalrank-N.log files in folders named
// nvdlfw_inspect_statistics_logs (the debug logs beside them, nvdlfw_inspect_logs, share
// the file names and are not statistics). Sorted by rank, then path. Throws
// std::runtime_error naming an input that is missing, not a regular file or directory, or
// a directory that holds no statistics log.
std::vector<LogFile> find_logs(const std::vector<std::string>& inputs);

// Parses every file. A line that is not NAME iteration=N value=X (after an optional
// "DATE TIME - LEVEL - " prefix), or whose iteration or value is not a number, is an
// error: LogError lists every such line. Blank lines are passed over. A last line without
// its newline is incomplete (Python's logging writes each record with one) and is skipped
// with a notice. Throws std::runtime_error for a file that cannot be read.
Log read_logs(const std::vector<LogFile>& files);
// One file, line by line, as read_logs parses it: values, warnings and notices go to
// `log`, malformed lines to `errors`. `file` is the file's index in log.files.
void parse_log(Log& log, std::int32_t file, std::istream& in, std::vector<Issue>& errors);

}  // namespace fp8scope::te_log
