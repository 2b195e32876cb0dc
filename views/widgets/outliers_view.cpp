// Outliers view. Heatmap cells hold log10(1 + count) so that rare exponents at the top
// of the range (the outliers) stay visible next to the bulk. The channel absmax plot
// draws, when there are more channels than pixels, the min/max envelope of the channels
// each pixel column covers: point sampling would alias away the outlier channels.
#include "widgets/outliers_view.h"

#include <QGridLayout>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>

#include "models/display_names.h"
#include "models/gate_up_alignment.h"
#include "models/outlier_comparison.h"
#include "widgets/compare_run_combo.h"
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
    auto* b = new QCPBars(plot->xAxis, plot->yAxis);
    b->setPen(Qt::NoPen);
    b->setBrush(color);
    return b;
}

// The compared run: the baseline's grey, else a colour apart from the selected run's.
QColor other_run_color(const trace::TraceMeta& meta, int other) {
    return other == trace::baseline_of(meta) ? series_color(0) : series_color(7);
}

void show_in_legend(QCPAbstractPlottable* p, bool shown) {
    if (shown) p->addToLegend();
    else p->removeFromLegend();
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
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    compare_ = add_compare_run_row(layout, this);
    auto* grid = new QGridLayout;
    layout->addLayout(grid);
    layers_ = make_plot(this, tr("log2 histogram per layer at cursor"));
    steps_ = make_plot(this, tr("log2 histogram over capture steps"));
    kurtosis_ = make_plot(this, tr("kurtosis per layer (3 = Gaussian)"));
    channels_ = make_plot(this, tr("per-channel absmax (red: outlier channels)"));
    grid->addWidget(layers_, 0, 0);
    grid->addWidget(steps_, 0, 1);
    grid->addWidget(kurtosis_, 1, 0);
    grid->addWidget(channels_, 1, 1);
    alignment_ = make_plot(this, tr("gate/up alignment per SwiGLU layer"));
    grid->addWidget(alignment_, 2, 0, 1, 2);
    // The histograms with their legends need the most height; the alignment plot, when
    // shown, as much as the kurtosis and channel plots.
    grid->setRowStretch(0, 4);
    grid->setRowStretch(1, 3);
    grid->setRowStretch(2, 3);
    alignment_->xAxis->setLabel(tr("step"));
    alignment_->yAxis->setLabel(tr("max |cos(gate row, up row)|"));
    alignment_->setVisible(false);
    place_legend_below(alignment_, 8);
    PlotInteraction::attach(alignment_, context.cursor);
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
    kurtosis_run_ = bars(kurtosis_, series_color(5));
    kurtosis_other_ = bars(kurtosis_, series_color(0));
    place_legend_below(kurtosis_, 2);
    channel_bars_ = bars(channels_, series_color(1));
    envelope_max_ = channels_->addGraph();
    envelope_min_ = channels_->addGraph();
    for (QCPGraph* g : {envelope_max_, envelope_min_}) g->setPen(QPen(series_color(1), 1));
    envelope_max_->setBrush(series_color(1).lighter(150));
    envelope_max_->setChannelFillGraph(envelope_min_);
    envelope_max_->setName(tr("absmax (max per pixel column)"));
    envelope_min_->setName(tr("absmax (min per pixel column)"));
    envelope_min_->removeFromLegend();
    outliers_ = channels_->addGraph();
    outliers_->setName(tr("outlier channel"));
    outliers_->setLineStyle(QCPGraph::lsImpulse);
    outliers_->setPen(QPen(Qt::red, 1.5));
    outliers_->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, Qt::red, 5));
    // Over the bars and outlier points: a line, so that both runs' values stay visible.
    other_channels_ = channels_->addGraph();
    other_channels_->setLineStyle(QCPGraph::lsStepCenter);
    place_legend_below(channels_, 3);
    connect(compare_, &QComboBox::currentIndexChanged, this, [this] { refresh(true); });
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
    for (int l = 0; l < nl; ++l)
        if (const OperandSummary* o = rd.operand(cap, {l, sel.gemm, sel.operand})) {
            hists[l] = o->histogram();
            present.push_back(hists[l]);
        }
    QCPColorMap* map = color_map(layers_);
    clear_fp8_marks(layers_);
    QCPRange marks(qQNaN(), qQNaN());
    for (int l = 0; l < nl; ++l)
        if (const OperandSummary* o = rd.operand(cap, {l, sel.gemm, sel.operand}))
            mark_fp8_range(&marks, layers_, d.meta, *o, l, true);
    const QString what = tr("%1 %2, run %3%4")
                             .arg(gemm_label(sel.gemm), operand_label(sel.operand), run_label(d.meta, ctx().selection->run()),
                                  compared_ ? tr(" (selected run only)") : QString());
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
}

void OutliersView::drawKurtosis(const TraceData& d, const RunData& rd, const RunData* od, int other,
                                std::int64_t common, std::int64_t step) {
    static const RunData none;
    const OperandRef sel = ctx().selection->operand();
    const int nl = static_cast<int>(d.meta.linears.size());
    // Compared: both runs at the step both recorded; alone: the newest capture at the cursor.
    const std::ptrdiff_t cap = rd.capture_index_at(step);
    const std::int64_t at = od ? common : cap >= 0 ? rd.capture_steps[cap] : -1;
    const std::vector<KurtosisPair> pairs = kurtosis_pairs(d, rd, od ? *od : none, sel.gemm, sel.operand, at);
    // Side by side when compared: the selected run's bar left of the linear's tick.
    const double half = od ? 0.2 : 0.0;
    QVector<double> lk, kv, ok, ov, all;
    for (const KurtosisPair& p : pairs) {
        if (!std::isnan(p.run)) { lk << p.linear - half; kv << p.run; all << p.run; }
        if (od && !std::isnan(p.other)) { ok << p.linear + half; ov << p.other; all << p.other; }
    }
    kurtosis_run_->setData(lk, kv);
    kurtosis_run_->setWidth(od ? 0.4 : 0.75);
    kurtosis_other_->setData(ok, ov);
    kurtosis_other_->setWidth(0.4);
    kurtosis_run_->setName(run_label(d.meta, ctx().selection->run()));
    if (od) {
        kurtosis_other_->setName(run_label(d.meta, other));
        kurtosis_other_->setBrush(other_run_color(d.meta, other));
    }
    show_in_legend(kurtosis_other_, od != nullptr);
    kurtosis_->legend->setVisible(od != nullptr);
    // One heavy-tailed tensor (kurtosis 1e4 and more) would flatten the rest on a linear axis.
    const bool log = spans_decades(all);
    if (log) set_log_ticks(kurtosis_->yAxis, 6);
    else {
        kurtosis_->yAxis->setScaleType(QCPAxis::stLinear);
        kurtosis_->yAxis->setTicker(QSharedPointer<QCPAxisTicker>(new QCPAxisTicker));
    }
    const QString what = log ? tr("kurtosis per layer (log; 3 = Gaussian)") : tr("kurtosis per layer (3 = Gaussian)");
    set_title(kurtosis_, od && at >= 0 ? tr("%1: %2 vs %3, step %4 (newest both captured)")
                                             .arg(what, run_label(d.meta, ctx().selection->run()), run_label(d.meta, other))
                                             .arg(at)
                                       : what);
    fit_axes(kurtosis_);
    if (!log) kurtosis_->yAxis->setRangeLower(0);
    else {  // the bars' base, 0, has no place on a log axis: the range is the values'
        const QVector<double> pos = gaps_for_log(all);
        double lo = INFINITY, hi = 0;
        for (double v : pos)
            if (v > 0) { lo = std::min(lo, v); hi = std::max(hi, v); }
        kurtosis_->yAxis->setRange(lo / 1.5, hi * 1.5);
    }
    QStringList names;
    for (int l = 0; l < nl; ++l) names << linear_label(d.meta, l);
    set_label_ticks(kurtosis_->xAxis, names);
    slant_tick_labels(kurtosis_->xAxis, names, nl > 4 ? 45 : 0);
    set_placeholder(kurtosis_, pairs.empty() ? (od ? tr("no capture step both runs recorded at or before this step")
                                                   : tr("no capture at or before this step"))
                                             : QString());
}

void OutliersView::drawSteps(const TraceData& d, const RunData& rd, std::int64_t step) {
    const OperandRef sel = ctx().selection->operand();
    clear_fp8_marks(steps_);
    set_title(steps_, tr("log2 |x| histogram over steps: %1, run %2%3")
                          .arg(short_operand_label(d.meta, sel), run_label(d.meta, ctx().selection->run()),
                               compared_ ? tr(" (selected run only)") : QString()));
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

void OutliersView::drawChannels(const TraceData& d, const RunData& rd, const RunData* od, int other,
                                std::int64_t common, std::int64_t step) {
    const OperandRef sel = ctx().selection->operand();
    QVector<double> k, v, ok, ov, ek, emin, emax, xk, xv;
    // Compared: both runs at the step both recorded (none there: the selected run alone).
    const bool compared = od && common >= 0;
    const OperandSummary* o = compared ? operand_at_capture(rd, common, sel) : rd.operand_at(step, sel);
    const OperandSummary* x = compared ? operand_at_capture(*od, common, sel) : nullptr;
    const std::span<const float> ch = o ? o->channel_absmax() : std::span<const float>();
    const std::span<const float> xch = x ? x->channel_absmax() : std::span<const float>();
    std::vector<float> sorted(ch.begin(), ch.end());
    std::nth_element(sorted.begin(), sorted.begin() + sorted.size() / 2, sorted.end());
    const double median = sorted.empty() ? 0 : sorted[sorted.size() / 2];
    const int pixels = std::max(100, channels_->axisRect()->width());
    const bool envelope = static_cast<int>(std::max(ch.size(), xch.size())) > pixels;
    for (std::size_t c = 0; c < ch.size(); ++c) {
        const bool outlier = median > 0 && ch[c] > kOutlierFactor * median;
        if (outlier) { ok << static_cast<double>(c); ov << ch[c]; }
        else if (!envelope) { k << static_cast<double>(c); v << ch[c]; }
    }
    if (envelope) {
        for (const ChannelBucket& b : channel_envelope(ch, pixels)) { ek << b.channel; emin << b.min; emax << b.max; }
        for (const ChannelBucket& b : channel_envelope(xch, pixels)) { xk << b.channel; xv << b.max; }
    } else
        for (std::size_t c = 0; c < xch.size(); ++c) { xk << static_cast<double>(c); xv << xch[c]; }
    channel_bars_->setData(k, v);
    envelope_max_->setData(ek, emax, true);
    envelope_min_->setData(ek, emin, true);
    outliers_->setData(ok, ov, true);
    other_channels_->setData(xk, xv, true);
    const QString run_name = run_label(d.meta, ctx().selection->run());
    channel_bars_->setName(tr("%1 absmax").arg(run_name));
    envelope_max_->setName(tr("%1 absmax (min to max per pixel column)").arg(run_name));
    show_in_legend(channel_bars_, !envelope);
    show_in_legend(envelope_max_, envelope);
    show_in_legend(other_channels_, x != nullptr);
    if (x) {
        other_channels_->setName(envelope ? tr("%1 absmax (max per pixel column)").arg(run_label(d.meta, other))
                                          : tr("%1 absmax").arg(run_label(d.meta, other)));
        other_channels_->setPen(QPen(other_run_color(d.meta, other), 1.5));
    }
    channels_->legend->setVisible(od != nullptr);
    fit_axes(channels_);
    channels_->yAxis->setRangeLower(0);
    const QString vs = x ? tr(" vs %1").arg(run_label(d.meta, other)) : QString();
    set_title(channels_, o ? tr("channel absmax: %1, run %2%3, step %4 (red: outliers)")
                                 .arg(short_operand_label(d.meta, sel), run_name, vs)
                                 .arg(o->step)
                           : tr("per-channel absmax (red: outlier channels)"));
    set_placeholder(channels_, ch.empty() ? tr("no channel absmax for %1").arg(operand_ref_label(d.meta, sel)) : QString());
}

void OutliersView::drawAlignment(const TraceData& d, const RunData& rd, std::int64_t step) {
    const std::vector<AlignmentLine> lines = alignment_lines(rd);
    alignment_->setVisible(!lines.empty());
    if (lines.empty()) return;
    alignment_->clearGraphs();
    for (std::size_t i = 0; i < lines.size(); ++i) {
        QCPGraph* g = alignment_->addGraph();
        g->setData(QVector<double>(lines[i].step.begin(), lines[i].step.end()),
                   QVector<double>(lines[i].max_abs_cos.begin(), lines[i].max_abs_cos.end()), true);
        g->setPen(QPen(series_color(int(i) + 1), 1.5));
        g->setName(tr("layer %1").arg(d.meta.linears.at(std::size_t(lines[i].linear)).layer));
    }
    // Channels past 0.9 are aligned: the ones Smooth-SwiGLU was made for.
    QCPGraph* aligned = alignment_->addGraph();
    aligned->setData({lines.front().step.front(), lines.front().step.back()}, {stats::kAlignedCos, stats::kAlignedCos});
    aligned->setPen(QPen(Qt::red, 1, Qt::DashLine));
    aligned->setName(tr("aligned (|cos| > %1)").arg(stats::kAlignedCos));
    alignment_->rescaleAxes();
    alignment_->yAxis->setRange(0, 1.02);
    const QString run_name = run_label(d.meta, ctx().selection->run());
    const trace::GateUpAlignmentRecord* a = most_aligned_at(rd, step);
    if (!a) {
        set_title(alignment_, tr("gate/up alignment per SwiGLU layer, run %1").arg(run_name));
        return;
    }
    QString title = tr("gate/up alignment, run %1, step %2: %3 most aligned (max |cos| %4, %5 channels > %6)\n"
                       "channel %7 leads (cos %8)")
                        .arg(run_name)
                        .arg(a->step)
                        .arg(linear_label(d.meta, a->linear))
                        .arg(a->max_abs_cos, 0, 'f', 2)
                        .arg(a->aligned)
                        .arg(stats::kAlignedCos)
                        .arg(a->top_channel)
                        .arg(a->top_cos, 0, 'f', 2);
    if (std::isfinite(a->top_down_amax) && a->down_amax_median > 0)
        title += tr(", fc2 input amax %1 = %2x the median channel's")
                     .arg(a->top_down_amax, 0, 'g', 3)
                     .arg(a->top_down_amax / a->down_amax_median, 0, 'f', 1);
    set_title(alignment_, title);
}

void OutliersView::redraw() {
    const int run = ctx().selection->run();
    const std::int64_t step = ctx().cursor->step();
    if (dataChanged()) ctx().store->read([&](const TraceData& d) { compare_->fill(d.meta); });
    const int other = compare_->otherThan(run);
    ctx().store->read([&](const TraceData& d) {
        static const RunData none;
        const int runs = static_cast<int>(d.runs.size());
        const RunData& rd = run >= 0 && run < runs ? d.runs[run] : none;
        const RunData* od = other >= 0 && other < runs ? &d.runs[other] : nullptr;
        const std::int64_t common = od ? common_capture_step(rd, *od, step) : -1;
        compared_ = od != nullptr;
        drawLayers(d, rd, step);
        drawSteps(d, rd, step);
        drawKurtosis(d, rd, od, other, common, step);
        drawChannels(d, rd, od, other, common, step);
        drawAlignment(d, rd, step);
    });
    for (QCustomPlot* p : {layers_, steps_, kurtosis_, channels_, alignment_}) p->replot();
}

}  // namespace fp8scope::views
