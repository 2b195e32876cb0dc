// Outliers view. Heatmap cells hold log10(1 + count) so that rare exponents at the top
// of the range (the outliers) stay visible next to the bulk. The channel absmax plot
// draws, when there are more channels than pixels, the min/max envelope of the channels
// each pixel column covers: point sampling would alias away the outlier channels.
#include "widgets/outliers_view.h"

#include <QGridLayout>
#include <algorithm>
#include <cmath>

#include "models/display_names.h"
#include "widgets/fp8_range_marks.h"
#include "widgets/plot_interaction.h"
#include "widgets/plot_style.h"

namespace fp8scope::views {

bool histogram_extent(const std::vector<HistogramCounts>& hists, int& lo, int& hi) {
    lo = kHistMaxExp + 1;
    hi = kHistMinExp - 1;
    for (const HistogramCounts& h : hists)
        for (int e = h.first(); !h.empty() && e <= h.last(); ++e)
            if (h.count(e) > 0) {
                lo = std::min(lo, e);
                hi = std::max(hi, e);
            }
    return lo <= hi;
}

namespace {

QCPColorMap* color_map(QCustomPlot* plot) {
    if (plot->plottableCount() > 0) return qobject_cast<QCPColorMap*>(plot->plottable(0));
    auto* map = new QCPColorMap(plot->xAxis, plot->yAxis);
    map->setGradient(QCPColorGradient::gpThermal);
    map->setInterpolate(false);
    auto* scale = new QCPColorScale(plot);
    plot->plotLayout()->addElement(plot->plotLayout()->rowCount() - 1, 1, scale);
    scale->axis()->setLabel("log10(1 + count)");
    map->setColorScale(scale);
    map->removeFromLegend();
    return map;
}

QCPBars* bars(QCustomPlot* plot, const QColor& color) {
    if (plot->plottableCount() > 0) return qobject_cast<QCPBars*>(plot->plottable(0));
    auto* b = new QCPBars(plot->xAxis, plot->yAxis);
    b->setPen(Qt::NoPen);
    b->setBrush(color);
    return b;
}

// Widens the exponent axis to show the FP8 range marks too: what falls off either end.
void show_marks(QCPAxis* axis, const QCPRange& marks) {
    if (std::isnan(marks.lower)) return;
    const QCPRange r = axis->range();
    axis->setRange(std::min(r.lower, marks.lower - 0.5), std::max(r.upper, marks.upper + 0.5));
}

}  // namespace

OutliersView::OutliersView(const ViewContext& context, QWidget* parent)
    : StoreView(context, "outliers", tr("Outliers"), parent) {
    auto* grid = new QGridLayout(this);
    grid->setContentsMargins(0, 0, 0, 0);
    layers_ = make_plot(this, tr("log2 histogram per layer at cursor"));
    steps_ = make_plot(this, tr("log2 histogram over capture steps"));
    kurtosis_ = make_plot(this, tr("kurtosis per layer (3 = Gaussian)"));
    channels_ = make_plot(this, tr("per-channel absmax (red: outlier channels)"));
    grid->addWidget(layers_, 0, 0);
    grid->addWidget(steps_, 0, 1);
    grid->addWidget(kurtosis_, 1, 0);
    grid->addWidget(channels_, 1, 1);
    layers_->xAxis->setLabel(tr("floor(log2 |x|)"));
    layers_->yAxis->setLabel(tr("linear"));
    steps_->xAxis->setLabel(tr("step"));
    steps_->yAxis->setLabel(tr("floor(log2 |x|)"));
    kurtosis_->xAxis->setLabel(tr("linear"));
    kurtosis_->yAxis->setLabel(tr("kurtosis"));
    channels_->xAxis->setLabel(tr("channel"));
    channels_->yAxis->setLabel(tr("absmax"));
    for (QCustomPlot* p : {layers_, steps_}) {
        color_map(p);
        add_fp8_mark_legend(p);
        place_legend_below(p, 3);
    }
    PlotInteraction::attach(steps_, context.cursor);
    // Channel absmax: bars while every channel has a pixel, else the envelope; outlier
    // channels as red points, never lost in either.
    bars(channels_, series_color(1));
    envelope_max_ = channels_->addGraph();
    envelope_min_ = channels_->addGraph();
    for (QCPGraph* g : {envelope_max_, envelope_min_}) g->setPen(QPen(series_color(1), 1));
    envelope_max_->setBrush(series_color(1).lighter(150));
    envelope_max_->setChannelFillGraph(envelope_min_);
    envelope_max_->setName(tr("absmax (max per pixel column)"));
    envelope_min_->setName(tr("absmax (min per pixel column)"));
    outliers_ = channels_->addGraph();
    outliers_->setName(tr("outlier channel"));
    outliers_->setLineStyle(QCPGraph::lsImpulse);
    outliers_->setPen(QPen(Qt::red, 1.5));
    outliers_->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, Qt::red, 5));
}

std::vector<ChannelBucket> channel_envelope(std::span<const float> v, int buckets) {
    std::vector<ChannelBucket> out;
    const std::size_t n = v.size();
    if (n == 0 || buckets <= 0) return out;
    const std::size_t b = std::min<std::size_t>(static_cast<std::size_t>(buckets), n);
    for (std::size_t i = 0; i < b; ++i) {
        const std::size_t lo = i * n / b, hi = (i + 1) * n / b;
        ChannelBucket k{0.5 * (static_cast<double>(lo) + static_cast<double>(hi - 1)), INFINITY, -INFINITY};
        for (std::size_t c = lo; c < hi; ++c) {
            k.min = std::min<double>(k.min, v[c]);
            k.max = std::max<double>(k.max, v[c]);
        }
        out.push_back(k);
    }
    return out;
}

void OutliersView::drawLayers(const TraceData& d, const RunData& rd, std::int64_t step) {
    const OperandRef sel = ctx().selection->operand();
    const auto cap = rd.capture_index_at(step);
    const int nl = static_cast<int>(d.meta.linears.size());
    std::vector<HistogramCounts> hists(nl), present;  // an absent operand's is empty
    QVector<double> lk, kv;
    for (int l = 0; l < nl; ++l)
        if (const OperandSummary* o = rd.operand(cap, {l, sel.gemm, sel.operand})) {
            hists[l] = o->histogram();
            present.push_back(hists[l]);
            lk << l;
            kv << o->figures[&OutlierSummary::kurtosis];
        }
    QCPColorMap* map = color_map(layers_);
    clear_fp8_marks(layers_);
    QCPRange marks(qQNaN(), qQNaN());
    for (int l = 0; l < nl; ++l)
        if (const OperandSummary* o = rd.operand(cap, {l, sel.gemm, sel.operand}))
            mark_fp8_range(&marks, layers_, d.meta, *o, l, true);
    const QString what = tr("%1 %2, run %3").arg(gemm_label(sel.gemm), operand_label(sel.operand), run_label(d.meta, ctx().selection->run()));
    set_title(layers_, cap >= 0 ? tr("log2 |x| histogram per layer: %1, step %2").arg(what).arg(rd.capture_steps[cap])
                                : tr("log2 |x| histogram per layer: %1").arg(what));
    int lo, hi;
    if (!histogram_extent(present, lo, hi)) {
        map->data()->clear();
        set_placeholder(layers_, tr("no capture at or before this step"));
    } else {
        set_placeholder(layers_, QString());
        // One layer or one exponent bin is still a row or column of the map.
        fill_grid(map, QCPRange(lo, hi), hi - lo + 1, QCPRange(0, nl - 1), nl,
                  [&](int c, int r) { return std::log10(1.0 + hists[r].count(lo + c)); });
        map->rescaleDataRange(true);
    }
    layers_->rescaleAxes();
    show_marks(layers_->xAxis, marks);
    QStringList names;
    for (int l = 0; l < nl; ++l) names << linear_label(d.meta, l);
    set_label_ticks(layers_->yAxis, names);
    bars(kurtosis_, series_color(5))->setData(lk, kv);
    // One heavy-tailed tensor (kurtosis 1e4 and more) would flatten the rest on a linear axis.
    const bool log = spans_decades(kv);
    if (log) set_log_ticks(kurtosis_->yAxis, 6);
    else {
        kurtosis_->yAxis->setScaleType(QCPAxis::stLinear);
        kurtosis_->yAxis->setTicker(QSharedPointer<QCPAxisTicker>(new QCPAxisTicker));
    }
    set_title(kurtosis_, log ? tr("kurtosis per layer (log; 3 = Gaussian)") : tr("kurtosis per layer (3 = Gaussian)"));
    fit_axes(kurtosis_);
    if (!log) kurtosis_->yAxis->setRangeLower(0);
    else {  // the bars' base, 0, has no place on a log axis: the range is the values'
        const QVector<double> pos = gaps_for_log(kv);
        double lo = INFINITY, hi = 0;
        for (double v : pos)
            if (v > 0) { lo = std::min(lo, v); hi = std::max(hi, v); }
        kurtosis_->yAxis->setRange(lo / 1.5, hi * 1.5);
    }
    set_label_ticks(kurtosis_->xAxis, names);
    slant_tick_labels(kurtosis_->xAxis, names, nl > 4 ? 45 : 0);
    set_placeholder(kurtosis_, lk.isEmpty() ? tr("no capture at or before this step") : QString());
}

void OutliersView::drawSteps(const TraceData& d, const RunData& rd, std::int64_t step) {
    const OperandRef sel = ctx().selection->operand();
    clear_fp8_marks(steps_);
    set_title(steps_, tr("log2 |x| histogram over steps: %1, run %2")
                          .arg(short_operand_label(d.meta, sel), run_label(d.meta, ctx().selection->run())));
    std::vector<HistogramCounts> hists;
    std::vector<double> steps;
    std::vector<const OperandSummary*> records;
    QCPRange marks(qQNaN(), qQNaN());
    for (std::size_t i = 0; i < rd.capture_steps.size() && rd.capture_steps[i] <= std::max<std::int64_t>(step, 0); ++i)
        if (const OperandSummary* o = rd.operand(static_cast<std::ptrdiff_t>(i), sel)) {
            hists.push_back(o->histogram());
            steps.push_back(static_cast<double>(rd.capture_steps[i]));
            records.push_back(o);
        }
    QCPColorMap* map = color_map(steps_);
    int lo, hi;
    if (!histogram_extent(hists, lo, hi)) {
        map->data()->clear();
        set_placeholder(steps_, tr("no captures of this operand yet"));
    } else {
        set_placeholder(steps_, QString());
        const int n = static_cast<int>(hists.size());
        // One capture step is still a column of the map, one step wide.
        fill_grid(map, QCPRange(steps.front(), steps.back()), n, QCPRange(lo, hi), hi - lo + 1,
                  [&](int c, int r) { return std::log10(1.0 + hists[c].count(lo + r)); });
        map->rescaleDataRange(true);
        // Each capture's column spans half the distance to its neighbours.
        const double half = n > 1 ? 0.5 * (steps.back() - steps.front()) / (n - 1) : 0.5;
        for (int i = 0; i < n; ++i) mark_fp8_range(&marks, steps_, d.meta, *records[i], steps[i], false, half);
    }
    steps_->rescaleAxes();
    show_marks(steps_->yAxis, marks);
}

void OutliersView::drawChannels(const TraceData& d, const RunData& rd, std::int64_t step) {
    const OperandRef sel = ctx().selection->operand();
    QVector<double> k, v, ok, ov, ek, emin, emax;
    const OperandSummary* o = rd.operand_at(step, sel);
    const std::span<const float> ch = o ? o->channel_absmax() : std::span<const float>();
    std::vector<float> sorted(ch.begin(), ch.end());
    std::nth_element(sorted.begin(), sorted.begin() + sorted.size() / 2, sorted.end());
    const double median = sorted.empty() ? 0 : sorted[sorted.size() / 2];
    const int pixels = std::max(100, channels_->axisRect()->width());
    const bool envelope = static_cast<int>(ch.size()) > pixels;
    for (std::size_t c = 0; c < ch.size(); ++c) {
        const bool outlier = median > 0 && ch[c] > kOutlierFactor * median;
        if (outlier) { ok << static_cast<double>(c); ov << ch[c]; }
        else if (!envelope) { k << static_cast<double>(c); v << ch[c]; }
    }
    if (envelope)
        for (const ChannelBucket& b : channel_envelope(ch, pixels)) { ek << b.channel; emin << b.min; emax << b.max; }
    qobject_cast<QCPBars*>(channels_->plottable(0))->setData(k, v);
    envelope_max_->setData(ek, emax, true);
    envelope_min_->setData(ek, emin, true);
    outliers_->setData(ok, ov, true);
    fit_axes(channels_);
    channels_->yAxis->setRangeLower(0);
    set_title(channels_, o ? tr("channel absmax: %1, run %2, step %3 (red: outliers)")
                                 .arg(short_operand_label(d.meta, sel), run_label(d.meta, ctx().selection->run()))
                                 .arg(o->step)
                           : tr("per-channel absmax (red: outlier channels)"));
    set_placeholder(channels_, ch.empty() ? tr("no channel absmax for %1").arg(operand_ref_label(d.meta, sel)) : QString());
}

void OutliersView::redraw() {
    const int run = ctx().selection->run();
    const std::int64_t step = ctx().cursor->step();
    ctx().store->read([&](const TraceData& d) {
        static const RunData none;
        const RunData& rd = run >= 0 && run < static_cast<int>(d.runs.size()) ? d.runs[run] : none;
        drawLayers(d, rd, step);
        drawSteps(d, rd, step);
        drawChannels(d, rd, step);
    });
    for (QCustomPlot* p : {layers_, steps_, kurtosis_, channels_}) p->replot();
}

}  // namespace fp8scope::views
