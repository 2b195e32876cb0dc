// The HDF5 layout of a trace (docs/trace-format.md), shared by the writer and the reader:
// dataset paths, the row structs of every table and their compound types. One definition
// for both sides, so the writer cannot write a field the reader does not know.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "h5.h"
#include "trace_records.h"

namespace fp8scope::trace::schema {

inline constexpr const char* kFormatName = "fp8scope-trace";

// Fixed string widths of the name tables (SWMR cannot append variable-length strings).
inline constexpr std::size_t kRunNameChars = 64;
inline constexpr std::size_t kNameChars = 128;
inline constexpr std::size_t kDetailChars = 255;

// Dataset paths.
inline constexpr const char* kRuns = "/meta/runs";
inline constexpr const char* kLinears = "/meta/linears";
inline constexpr const char* kRecipes = "/meta/recipes";
inline constexpr const char* kTrainingRecipes = "/meta/training_recipes";
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

// Row structs. Names are NUL-padded fixed-length strings.
struct RunRow {
    char name[kRunNameChars];
    char recipe[kNameChars];
};
struct LinearRow {
    char name[kNameChars];
    std::int32_t layer;
    std::int64_t in_features, out_features;
};
struct NameRow {
    char name[kNameChars];
};
struct StepRow {
    std::int32_t run;
    std::int64_t step;
    double loss, eval_loss, lr, grad_norm, step_time_s, tokens_per_s;
    std::int32_t recipe;
};
struct EventRow {
    std::int32_t run;
    std::int64_t step;
    std::int32_t kind;
    char detail[kDetailChars];
};
struct ScalingIndexRow {
    std::int32_t run;
    std::int64_t step;
};
// One operand at one capture step. (offset, count) pairs point into the flat datasets.
struct OperandRow {
    std::int32_t run;
    std::int64_t step;
    std::int32_t linear;
    std::int8_t gemm, operand;
    std::int32_t recipe_in_use;
    double scale;
    std::int64_t numel, finite, nan, inf, zero;
    double amax, min_nonzero_abs, mean, rms, stddev, dynamic_range;
    double kurtosis, outlier_k, frac_beyond_k_rms;
    std::int64_t hist_zero, hist_nan, hist_inf;
    std::int32_t hist_min_exp;  // exponent of the first stored histogram bin
    std::uint64_t hist_offset, hist_count;
    std::uint64_t errors_offset, errors_count;
    std::uint64_t channel_offset, channel_count;
    std::uint64_t top_offset, top_count;
    std::uint64_t history_offset, history_count;
};
// The operand key columns that OperandRow and BlockMapRow share.
template <class Row>
void put_key(Row& row, const OperandKey& k) {
    row.run = k.run;
    row.step = k.step;
    row.linear = k.linear;
    row.gemm = static_cast<std::int8_t>(k.gemm);
    row.operand = static_cast<std::int8_t>(k.operand);
}
template <class Row>
OperandKey key_of(const Row& row) {
    return {row.run, row.step, row.linear, static_cast<Gemm>(row.gemm), static_cast<Operand>(row.operand)};
}
struct ErrorRow {
    std::int32_t recipe;
    double amax, mse, sqnr_db, rel_l2, max_abs_err, cosine;
    double underflow_pct, overflow_pct, scale_inv_min, scale_inv_max;
    std::int64_t nonfinite_out;
};
struct TopRow {
    float value;
    std::int64_t row, col;
};
struct BlockMapRow {
    std::int32_t run;
    std::int64_t step;
    std::int32_t linear;
    std::int8_t gemm, operand;
    std::int32_t recipe;
    std::int64_t rows, cols;
    std::int32_t tile_rows, tile_cols, grid_rows, grid_cols;
    std::uint64_t offset, count;  // into absmax, scale_inv and sqnr_db alike
};
struct OpRow {
    std::int32_t run;
    std::int64_t step;
    std::int32_t op, linear, layer, device, stream;
    std::int64_t start_ns, end_ns;
};

// Memory (native, struct layout) compound types. The file types are their packed copies.
h5::Id run_type();
h5::Id linear_type();
h5::Id name_type();
h5::Id step_type();
h5::Id event_type();
h5::Id scaling_index_type();
h5::Id operand_type();
h5::Id error_type();
h5::Id top_type();
h5::Id blockmap_type();
h5::Id op_type();
h5::Id packed(hid_t memtype);

// A NUL-padded fixed string field: copies at most N bytes; `fits` false when longer.
template <std::size_t N>
bool put_name(char (&dst)[N], std::string_view s) {
    std::size_t n = s.size() < N ? s.size() : N;
    for (std::size_t i = 0; i < N; ++i) dst[i] = i < n ? s[i] : '\0';
    return s.size() <= N;
}
template <std::size_t N>
std::string get_name(const char (&src)[N]) {
    std::size_t n = 0;
    while (n < N && src[n] != '\0') ++n;
    return std::string(src, n);
}

}  // namespace fp8scope::trace::schema
