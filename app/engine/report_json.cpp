// Builds the JSON document of `analyze --json`. Key order follows the structs so the
// output reads like the definitions in FP8.md.
#include "report_json.h"

#include <cmath>

#include "version.h"

namespace fp8scope::cli {
namespace {

using json = nlohmann::ordered_json;

// JSON has no NaN or Infinity: they are written as null (sqnr of an exact quantization
// is +Inf, figures of an all-zero tensor are NaN).
json number(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }

json histogram_json(const Log2Histogram& h) {
    return json{{"min_exponent", kHistMinExp},
                {"counts", h.bins},
                {"zero", h.zero},
                {"nan", h.nan},
                {"inf", h.inf}};
}

json outliers_json(const OutlierSummary& o) {
    json absmax = json::array();
    for (float v : o.channel_absmax) absmax.push_back(number(v));
    json top = json::array();
    for (const TopValue& v : o.top) top.push_back({{"value", number(v.value)}, {"row", v.row}, {"col", v.col}});
    return json{{"kurtosis", number(o.kurtosis)},
                {"k", number(o.k)},
                {"frac_beyond_k_rms", number(o.frac_beyond_k_rms)},
                {"channel_absmax", absmax},
                {"top", top}};
}

json stats_json(const TensorStats& s) {
    return json{{"numel", s.numel},
                {"finite", s.finite},
                {"nan", s.nan},
                {"inf", s.inf},
                {"zero", s.zero},
                {"amax", number(s.amax)},
                {"min_nonzero_abs", number(s.min_nonzero_abs)},
                {"mean", number(s.mean)},
                {"rms", number(s.rms)},
                {"stddev", number(s.stddev)},
                {"dynamic_range", number(s.dynamic_range)},
                {"histogram", histogram_json(s.histogram)},
                {"outliers", outliers_json(s.outliers)}};
}

json error_json(const ErrorStats& e) {
    return json{{"recipe", e.recipe},
                {"amax", number(e.amax)},
                {"mse", number(e.mse)},
                {"sqnr_db", number(e.sqnr_db)},
                {"rel_l2", number(e.rel_l2)},
                {"max_abs_err", number(e.max_abs_err)},
                {"cosine", number(e.cosine)},
                {"underflow_pct", number(e.underflow_pct)},
                {"overflow_pct", number(e.overflow_pct)},
                {"scale_inv_min", number(e.scale_inv_min)},
                {"scale_inv_max", number(e.scale_inv_max)},
                {"nonfinite_out", e.nonfinite_out}};
}

}  // namespace

json analysis_json(const std::vector<std::string>& recipes, const std::vector<TensorAnalysis>& tensors,
                   const std::vector<FileError>& errors) {
    json doc{{"tool", "fp8scope-engine analyze"}, {"version", kEngineVersion}, {"recipes", recipes}};
    json& ts = doc["tensors"] = json::array();
    for (const TensorAnalysis& t : tensors) {
        json rs = json::array();
        for (const ErrorStats& e : t.analysis.errors) rs.push_back(error_json(e));
        ts.push_back({{"file", t.file},
                      {"name", t.name},
                      {"dtype", t.dtype},
                      {"shape", t.shape},
                      {"numel", t.analysis.tensor.numel},
                      {"stats", stats_json(t.analysis.tensor)},
                      {"recipes", rs}});
    }
    json& es = doc["errors"] = json::array();
    for (const FileError& e : errors) es.push_back({{"file", e.file}, {"error", e.error}});
    return doc;
}

}  // namespace fp8scope::cli
