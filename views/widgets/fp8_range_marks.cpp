// FP8 range marks on histogram heatmaps.
#include "widgets/fp8_range_marks.h"

#include <cmath>
#include <optional>
#include <qcustomplot.h>

#include "fp8/recipe.h"

namespace fp8scope::views {

namespace {
constexpr char kMark[] = "fp8_range_mark";

// A marked element format: its name, range and colour (lime, magenta and orange: apart
// from each other and from the histograms' blues and whites).
struct MarkedFormat {
    const char* name;
    double max, min_normal, min_subnormal;
    QColor color;
    std::optional<Format> fp8;  // none: E2M1
};

MarkedFormat fp8_format(const char* name, Format f, QColor color) {
    const FormatInfo& i = info(f);
    return {name, i.max, i.min_normal, i.min_subnormal, color, f};
}

const MarkedFormat kFormats[] = {
    fp8_format("E4M3", Format::E4M3, QColor(0x7c, 0xfc, 0x00)),
    fp8_format("E5M2", Format::E5M2, QColor(0xff, 0x3c, 0xc8)),
    {"E2M1", 6.0, 1.0, 0.5, QColor(0xff, 0x9f, 0x1a), std::nullopt},  // 1.0 = 2^(1 - bias 1)
};
const Qt::PenStyle kEdgeStyle[3] = {Qt::SolidLine, Qt::DashLine, Qt::DotLine};  // max, min normal, min subnormal

Fp8RangeLog2 range_log2(const MarkedFormat& m, double scale) {
    if (!(scale > 0) || !std::isfinite(scale)) return {};
    return {std::log2(m.max / scale), std::log2(m.min_normal / scale), std::log2(m.min_subnormal / scale)};
}
}  // namespace

Fp8RangeLog2 fp8_range_log2(Format f, double scale) {
    return range_log2(kFormats[f == Format::E4M3 ? 0 : 1], scale);
}

double format_scale(const trace::TraceMeta& meta, const OperandSummary& o, Format f) {
    const double scale = o.figures[&trace::OperandRecord::scale], amax = o.figures[&TensorStats::amax];
    if (std::isfinite(scale) && scale > 0 && o.recipe_in_use >= 0 && o.recipe_in_use < static_cast<int>(meta.quantizers.size()))
        try {
            // Per-tensor quantizers only: a block quantizer's scales are per tile.
            const Recipe r = parse_recipe(meta.quantizers[o.recipe_in_use]);
            const bool per_tensor = std::holds_alternative<CurrentScaling>(r) || std::holds_alternative<DelayedScaling>(r);
            if (per_tensor && recipe_format(r) == f) return scale;
        } catch (const std::exception&) {
            // an unknown quantizer name: fall back to current scaling
        }
    return amax > 0 ? fp8_max(f) / amax : NAN;
}

void mark_fp8_range(QCPRange* extent, QCustomPlot* plot, const trace::TraceMeta& meta, const OperandSummary& o, double at,
                    bool exponent_on_x, double half_width) {
    for (const MarkedFormat& m : kFormats) {
        // E2M1 is always block-scaled: marked at the scale 6 / amax, the range one block
        // holding the tensor's amax keeps.
        const double amax = o.figures[&TensorStats::amax];
        const double scale = m.fp8 ? format_scale(meta, o, *m.fp8) : amax > 0 ? m.max / amax : NAN;
        const Fp8RangeLog2 r = range_log2(m, scale);
        const double edges[3] = {r.max, r.min_normal, r.min_subnormal};
        for (int e = 0; e < 3; ++e) {
            if (!std::isfinite(edges[e])) continue;
            const double x = exponent_coord(edges[e]);
            if (std::isnan(extent->lower)) *extent = QCPRange(x, x);
            else extent->expand(x);
            auto* line = new QCPItemLine(plot);
            line->setObjectName(kMark);
            line->setSelectable(false);
            line->setClipToAxisRect(true);
            line->setPen(QPen(m.color, 2, kEdgeStyle[e]));
            if (exponent_on_x) {
                line->start->setCoords(x, at - half_width);
                line->end->setCoords(x, at + half_width);
            } else {
                line->start->setCoords(at - half_width, x);
                line->end->setCoords(at + half_width, x);
            }
        }
    }
}

void clear_fp8_marks(QCustomPlot* plot) {
    for (int i = plot->itemCount() - 1; i >= 0; --i)
        if (plot->item(i)->objectName() == kMark) plot->removeItem(i);
}

int fp8_mark_count(const QCustomPlot* plot) {
    int n = 0;
    for (int i = 0; i < plot->itemCount(); ++i) n += plot->item(i)->objectName() == kMark;
    return n;
}

void add_fp8_mark_legend(QCustomPlot* plot) {
    const QString edges[3] = {QObject::tr("max"), QObject::tr("min normal"), QObject::tr("min subnormal")};
    for (const MarkedFormat& m : kFormats) {
        for (int e = 0; e < 3; ++e) {
            QCPGraph* g = plot->addGraph();
            g->setName(QStringLiteral("%1 %2").arg(QLatin1String(m.name), edges[e]));
            g->setPen(QPen(m.color.darker(130), 2, kEdgeStyle[e]));  // readable on the white legend
        }
    }
}

}  // namespace fp8scope::views
