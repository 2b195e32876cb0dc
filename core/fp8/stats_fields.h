// The field lists of the statistics (stats.h), in declaration order: the live wire sends
// the fields in this order, and the trace tables, the analysis report, JSON and CSV take
// their columns from here (util/field_list.h has the pattern).
#pragma once

#include "fp8/stats.h"
#include "util/field_list.h"

namespace fp8scope {

template <fields::Of<Log2Histogram> S, class V>
constexpr void visit_fields(S& h, V&& v) {
    v("bins", h.bins);
    v("zero", h.zero);
    v("nan", h.nan);
    v("inf", h.inf);
}

template <fields::Of<TopValue> S, class V>
constexpr void visit_fields(S& t, V&& v) {
    v("value", t.value);
    v("row", t.row);
    v("col", t.col);
}

template <fields::Of<OutlierSummary> S, class V>
constexpr void visit_fields(S& o, V&& v) {
    v("kurtosis", o.kurtosis);
    // A bare "k" would be unclear beside the tensor's other figures.
    v("k", o.k, fields::Setting{}, fields::FlatName{"outlier_k"});
    v("frac_beyond_k_rms", o.frac_beyond_k_rms);
    v("channel_absmax", o.channel_absmax);
    v("top", o.top);
}

template <fields::Of<TensorStats> S, class V>
constexpr void visit_fields(S& s, V&& v) {
    v("numel", s.numel);
    v("finite", s.finite);
    v("nan", s.nan);
    v("inf", s.inf);
    v("zero", s.zero);
    v("amax", s.amax);
    v("min_nonzero_abs", s.min_nonzero_abs);
    v("mean", s.mean);
    v("rms", s.rms);
    v("stddev", s.stddev);
    v("dynamic_range", s.dynamic_range);
    v("histogram", s.histogram);
    v("outliers", s.outliers);
}

template <fields::Of<ErrorStats> S, class V>
constexpr void visit_fields(S& e, V&& v) {
    v("quantizer", e.recipe);
    v("amax", e.amax);
    v("mse", e.mse);
    v("sqnr_db", e.sqnr_db);
    v("rel_l2", e.rel_l2);
    v("max_abs_err", e.max_abs_err);
    v("cosine", e.cosine);
    v("underflow_pct", e.underflow_pct);
    v("overflow_pct", e.overflow_pct);
    v("scale_inv_min", e.scale_inv_min);
    v("scale_inv_max", e.scale_inv_max);
    v("nonfinite_out", e.nonfinite_out);
}

}  // namespace fp8scope
