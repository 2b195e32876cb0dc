// Builds the JSON document of `analyze --json`. Keys and their order come from the field
// lists (fp8/stats_fields.h), so the output reads like the definitions in FP8.md.
#include "report_json.h"

#include <cmath>
#include <string_view>
#include <type_traits>

#include "fp8/stats_fields.h"
#include "version.h"

namespace fp8scope::cli {
namespace {

using json = nlohmann::ordered_json;

// JSON has no NaN or Infinity: they are written as null (sqnr of an exact quantization
// is +Inf, figures of an all-zero tensor are NaN).
json number(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }

// Any field: numbers, strings, lists, and structs as objects in their list's order.
template <class T>
json value(const T& v) {
    if constexpr (std::is_floating_point_v<T>) {
        return number(v);
    } else if constexpr (std::is_arithmetic_v<T> || std::is_same_v<T, std::string>) {
        return json(v);
    } else if constexpr (fields::Record<T>) {
        json j = json::object();
        visit_fields(v, [&](std::string_view name, const auto& member, const auto&...) {
            using M = std::remove_cvref_t<decltype(member)>;
            if constexpr (std::is_same_v<M, decltype(Log2Histogram::bins)>) {
                // Dense bins: written as counts from the exponent of the first bin.
                j["min_exponent"] = kHistMinExp;
                j["counts"] = member;
            } else {
                j[std::string(name)] = value(member);
            }
        });
        return j;
    } else {  // a vector or an array
        json a = json::array();
        for (const auto& e : v) a.push_back(value(e));
        return a;
    }
}

}  // namespace

json analysis_json(const std::vector<std::string>& quantizers, const std::vector<TensorAnalysis>& tensors,
                   const std::vector<FileError>& errors) {
    json doc{{"tool", "fp8scope-engine analyze"}, {"version", kEngineVersion}, {"quantizers", quantizers}};
    json& ts = doc["tensors"] = json::array();
    for (const TensorAnalysis& t : tensors) {
        json qs = json::array();
        for (const ErrorStats& e : t.analysis.errors) qs.push_back(value(e));
        ts.push_back({{"file", t.file},
                      {"name", t.name},
                      {"dtype", t.dtype},
                      {"shape", t.shape},
                      {"numel", t.analysis.tensor.numel},
                      {"stats", value(t.analysis.tensor)},
                      {"quantizers", qs}});
    }
    json& es = doc["errors"] = json::array();
    for (const FileError& e : errors) es.push_back({{"file", e.file}, {"error", e.error}});
    return doc;
}

}  // namespace fp8scope::cli
