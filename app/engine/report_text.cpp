// Text tables for `analyze`: aligned columns, dB and percentages with two decimals,
// error magnitudes in scientific notation (they span many decades between quantizers). The
// error table's figures come from ErrorStats' field list; kShown orders and formats them.
#include "report_text.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "fp8/stats_fields.h"
#include "util/strprintf.h"

namespace fp8scope::cli {
namespace {

// log2 of the ratio of the largest to the smallest scale: how far the block scales spread.
std::string scale_spread(const ErrorStats& e) {
    if (!(e.scale_inv_min > 0) || !std::isfinite(e.scale_inv_min) || !std::isfinite(e.scale_inv_max)) return "-";
    return strprintf("%.2f", std::log2(e.scale_inv_max / e.scale_inv_min));
}

// The numeric figures of ErrorStats (fp8/stats_fields.h), in list order.
std::vector<double> figures(const ErrorStats& e) {
    std::vector<double> out;
    fields::visit_scalars(e, [&](std::string_view, const auto& m, const auto&...) {
        if constexpr (std::is_arithmetic_v<std::remove_cvref_t<decltype(m)>>) out.push_back(static_cast<double>(m));
    });
    return out;
}
std::vector<std::string_view> figure_names() {
    std::vector<std::string_view> out;
    const ErrorStats probe;
    fields::visit_scalars(probe, [&](std::string_view name, const auto& m, const auto&...) {
        if constexpr (std::is_arithmetic_v<std::remove_cvref_t<decltype(m)>>) out.push_back(name);
    });
    return out;
}

// How the table shows a figure, in the order it shows them; nullptr: not shown. Figures
// not named here follow them, as "%.4g".
struct Shown {
    std::string_view field;
    const char* format;
};
constexpr Shown kShown[] = {
    {"amax", "%.3e"},          {"sqnr_db", "%.2f"},      {"mse", "%.3e"},
    {"rel_l2", "%.3e"},        {"max_abs_err", "%.3e"},  {"cosine", "%.6f"},
    {"underflow_pct", "%.2f"}, {"overflow_pct", "%.2f"}, {"scale_inv_min", "%.3e"},
    {"scale_inv_max", "%.3e"}, {"nonfinite_out", nullptr},
};

struct Column {
    std::string_view title;
    int figure;          // index into figures(); -1: the scale spread
    const char* format;
};

std::vector<Column> error_columns() {
    const auto names = figure_names();
    auto index_of = [&](std::string_view n) {
        return static_cast<int>(std::find(names.begin(), names.end(), n) - names.begin());
    };
    std::vector<Column> out;
    for (const Shown& s : kShown)
        if (s.format && index_of(s.field) < static_cast<int>(names.size()))
            out.push_back({s.field, index_of(s.field), s.format});
    for (std::string_view n : names)
        if (std::none_of(std::begin(kShown), std::end(kShown), [&](const Shown& s) { return s.field == n; }))
            out.push_back({n, index_of(n), "%.4g"});
    out.push_back({"scale_range_bits", -1, nullptr});
    return out;
}

std::string cell(const Column& c, const ErrorStats& e, const std::vector<double>& values) {
    return c.figure < 0 ? scale_spread(e) : strprintf(c.format, values[c.figure]);
}

constexpr std::size_t kTopShown = 5;

std::string shape_text(const std::vector<std::int64_t>& shape) {
    std::string s;
    for (std::size_t i = 0; i < shape.size(); ++i) {
        if (i) s += 'x';
        s += std::to_string(shape[i]);
    }
    return s;
}

}  // namespace

void print_tensor_text(std::FILE* out, const TensorAnalysis& t) {
    const TensorStats& s = t.analysis.tensor;
    std::fprintf(out, "%s: %s  %s  %s  numel %lld\n", t.file.c_str(), t.name.c_str(), t.dtype.c_str(),
                 shape_text(t.shape).c_str(), static_cast<long long>(s.numel));
    std::fprintf(out,
                 "  amax %.4e  finite %lld  nan %lld  inf %lld  zero %lld  dynamic range %.2f bits"
                 "  kurtosis %.2f  frac |x| > %g rms %.3e\n",
                 s.amax, static_cast<long long>(s.finite), static_cast<long long>(s.nan),
                 static_cast<long long>(s.inf), static_cast<long long>(s.zero), s.dynamic_range,
                 s.outliers.kurtosis, s.outliers.k, s.outliers.frac_beyond_k_rms);
    if (!s.outliers.top.empty()) {
        std::string line = "  top |x|:";
        for (std::size_t i = 0; i < std::min(kTopShown, s.outliers.top.size()); ++i) {
            const TopValue& v = s.outliers.top[i];
            line += strprintf("  %.4g at (%lld,%lld)", v.value, static_cast<long long>(v.row),
                           static_cast<long long>(v.col));
        }
        std::fprintf(out, "%s\n", line.c_str());
    }

    // Widths: the widest of title and cells per column.
    std::size_t name_w = 9;
    for (const auto& e : t.analysis.errors) name_w = std::max(name_w, e.recipe.size());
    static const std::vector<Column> columns = error_columns();
    std::vector<std::vector<std::string>> cells;
    std::vector<std::size_t> widths;
    for (const Column& c : columns) widths.push_back(c.title.size());
    for (const auto& e : t.analysis.errors) {
        auto& row = cells.emplace_back();
        const auto values = figures(e);
        for (std::size_t i = 0; i < columns.size(); ++i) {
            row.push_back(cell(columns[i], e, values));
            widths[i] = std::max(widths[i], row.back().size());
        }
    }
    std::string header = strprintf("  %-*s", static_cast<int>(name_w), "quantizer");
    for (std::size_t i = 0; i < columns.size(); ++i)
        header += strprintf("  %*s", static_cast<int>(widths[i]), std::string(columns[i].title).c_str());
    std::fprintf(out, "%s\n", header.c_str());
    for (std::size_t r = 0; r < cells.size(); ++r) {
        std::string line = strprintf("  %-*s", static_cast<int>(name_w), t.analysis.errors[r].recipe.c_str());
        for (std::size_t i = 0; i < cells[r].size(); ++i)
            line += strprintf("  %*s", static_cast<int>(widths[i]), cells[r][i].c_str());
        std::fprintf(out, "%s\n", line.c_str());
    }
    std::fprintf(out, "\n");
}

}  // namespace fp8scope::cli
