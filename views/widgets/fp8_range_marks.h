// The element formats' representable ranges (E4M3, E5M2 and FP4's E2M1) marked on the
// log2 |x| histograms. The histograms
// count the operand's raw values by floor(log2 |x|); what a format keeps depends on the
// scale the values are multiplied by before the cast, so the marks sit where
// fp8 max / scale, min normal / scale and min subnormal / scale fall on the raw axis.
// The scale is the one in use when the operand trains per-tensor in that format, else the
// one per-tensor current scaling would take (fp8 max / amax: the top mark at amax). E2M1,
// only ever block-scaled, is marked at 6 / amax: the 3.6 binades one block keeps.
#pragma once

#include "fp8/format.h"
#include "models/run_data.h"

class QCustomPlot;
class QCPRange;

namespace fp8scope::views {

// log2 of the raw |x| at the format's max, min normal and min subnormal.
struct Fp8RangeLog2 {
    double max = NAN, min_normal = NAN, min_subnormal = NAN;
};
Fp8RangeLog2 fp8_range_log2(Format f, double scale);
// The scale format `f` takes for operand `o` (see above); NaN when it has none (amax 0).
double format_scale(const trace::TraceMeta& meta, const OperandSummary& o, Format f);
// A histogram cell e spans [2^e, 2^(e+1)) and is centred on e: a raw |x| lies at
// log2|x| - 0.5 on the heatmap's exponent axis.
inline double exponent_coord(double log2_value) { return log2_value - 0.5; }

// Marks the three formats' ranges across one row (exponent on x) or column (exponent on y) of
// a histogram heatmap, from `at` - 0.5 to `at` + 0.5 on the other axis. Widens `extent`
// (exponent coordinates; start it as NaN, NaN) to hold the marks, so that the axis can
// show them all.
void mark_fp8_range(QCPRange* extent, QCustomPlot* plot, const trace::TraceMeta& meta, const OperandSummary& o, double at,
                    bool exponent_on_x, double half_width = 0.5);
void clear_fp8_marks(QCustomPlot* plot);
// The marks on `plot` (for tests): (format, edge) pairs in drawing order.
int fp8_mark_count(const QCustomPlot* plot);
// Legend entries that explain the marks' colours and dashes.
void add_fp8_mark_legend(QCustomPlot* plot);

}  // namespace fp8scope::views
