// Text tables for `analyze`: aligned columns, dB and percentages with two decimals,
// error magnitudes in scientific notation (they span many decades between recipes).
#include "report_text.h"

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <string>
#include <vector>

namespace fp8scope::cli {
namespace {

std::string format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string format(const char* fmt, ...) {
    char buf[256];
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return buf;
}

// log2 of the ratio of the largest to the smallest scale: how far the block scales spread.
std::string scale_spread(const ErrorStats& e) {
    if (!(e.scale_inv_min > 0) || !std::isfinite(e.scale_inv_min) || !std::isfinite(e.scale_inv_max)) return "-";
    return format("%.2f", std::log2(e.scale_inv_max / e.scale_inv_min));
}

struct Column {
    const char* title;
    std::string (*cell)(const ErrorStats&);
};

const Column kColumns[] = {
    {"amax", [](const ErrorStats& e) { return format("%.3e", e.amax); }},
    {"sqnr_db", [](const ErrorStats& e) { return format("%.2f", e.sqnr_db); }},
    {"mse", [](const ErrorStats& e) { return format("%.3e", e.mse); }},
    {"rel_l2", [](const ErrorStats& e) { return format("%.3e", e.rel_l2); }},
    {"max_abs_err", [](const ErrorStats& e) { return format("%.3e", e.max_abs_err); }},
    {"cosine", [](const ErrorStats& e) { return format("%.6f", e.cosine); }},
    {"underflow_pct", [](const ErrorStats& e) { return format("%.2f", e.underflow_pct); }},
    {"overflow_pct", [](const ErrorStats& e) { return format("%.2f", e.overflow_pct); }},
    {"scale_inv_min", [](const ErrorStats& e) { return format("%.3e", e.scale_inv_min); }},
    {"scale_inv_max", [](const ErrorStats& e) { return format("%.3e", e.scale_inv_max); }},
    {"scale_range_bits", scale_spread},
};

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
            line += format("  %.4g at (%lld,%lld)", v.value, static_cast<long long>(v.row),
                           static_cast<long long>(v.col));
        }
        std::fprintf(out, "%s\n", line.c_str());
    }

    // Widths: the widest of title and cells per column.
    std::size_t recipe_w = 6;
    for (const auto& e : t.analysis.errors) recipe_w = std::max(recipe_w, e.recipe.size());
    std::vector<std::vector<std::string>> cells;
    std::vector<std::size_t> widths;
    for (const Column& c : kColumns) widths.push_back(std::string(c.title).size());
    for (const auto& e : t.analysis.errors) {
        auto& row = cells.emplace_back();
        for (std::size_t i = 0; i < std::size(kColumns); ++i) {
            row.push_back(kColumns[i].cell(e));
            widths[i] = std::max(widths[i], row.back().size());
        }
    }
    std::string header = format("  %-*s", static_cast<int>(recipe_w), "recipe");
    for (std::size_t i = 0; i < std::size(kColumns); ++i)
        header += format("  %*s", static_cast<int>(widths[i]), kColumns[i].title);
    std::fprintf(out, "%s\n", header.c_str());
    for (std::size_t r = 0; r < cells.size(); ++r) {
        std::string line = format("  %-*s", static_cast<int>(recipe_w), t.analysis.errors[r].recipe.c_str());
        for (std::size_t i = 0; i < cells[r].size(); ++i)
            line += format("  %*s", static_cast<int>(widths[i]), cells[r][i].c_str());
        std::fprintf(out, "%s\n", line.c_str());
    }
    std::fprintf(out, "\n");
}

}  // namespace fp8scope::cli
