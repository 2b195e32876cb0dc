// The compound rows of the analysis report, from the field lists: one definition for its
// writer and its reader. Members are laid out as a C struct would (Packing::Aligned: the
// format of version 1).
#pragma once

#include "fp8/stats_fields.h"
#include "h5_columns.h"

namespace fp8scope::analysis_layout {

// `stats`: the tensor's figures, then its outlier figures.
template <class V, class S>
void stats_columns(V& v, S& s) {
    fields::visit_scalars(s, v);           // counts, amax, moments, dynamic range
    fields::visit_scalars(s.outliers, v);  // the outlier figures and their k
}

inline h5::Layout stats() {
    return h5::make_layout<h5::Packing::Aligned>([](auto& v) {
        TensorStats defaults;
        stats_columns(v, defaults);
    });
}

inline h5::Layout top() {
    return h5::make_layout<h5::Packing::Aligned>([](auto& v) {
        TopValue defaults;
        fields::visit_scalars(defaults, v);
    });
}

// `errors` without the quantizer name (a string whose width the writer picks per file).
inline h5::Layout error_figures() {
    return h5::make_layout<h5::Packing::Aligned>([](auto& v) {
        ErrorStats defaults;
        fields::visit_scalars(defaults, v);
    });
}

}  // namespace fp8scope::analysis_layout
