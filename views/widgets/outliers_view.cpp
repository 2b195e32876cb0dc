// Outliers view. Heatmap cells hold log10(1 + count) so that rare exponents at the top
// of the range (the outliers) stay visible next to the bulk.
#include "widgets/outliers_view.h"

#include <QGridLayout>
#include <algorithm>
#include <cmath>

#include "models/display_names.h"
#include "widgets/plot_style.h"

namespace fp8scope::views {

bool histogram_extent(const std::vector<const Log2Histogram*>& hists, int& lo, int& hi) {
    lo = kHistMaxExp + 1;
    hi = kHistMinExp - 1;
    for (const Log2Histogram* h : hists)
        for (int b = 0; b < kHistBins; ++b)
            if (h->bins[b] > 0) {
                lo = std::min(lo, b + kHistMinExp);
                hi = std::max(hi, b + kHistMinExp);
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
    return map;
}

QCPBars* bars(QCustomPlot* plot, const QColor& color) {
    if (plot->plottableCount() > 0) return qobject_cast<QCPBars*>(plot->plottable(0));
    auto* b = new QCPBars(plot->xAxis, plot->yAxis);
    b->setPen(Qt::NoPen);
    b->setBrush(color);
    return b;
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
    channels_->xAxis->setLabel(tr("channel"));
    channels_->yAxis->setLabel(tr("absmax"));
}

void OutliersView::drawLayers(const TraceData& d, const RunData& rd, std::int64_t step) {
    const OperandRef sel = ctx().selection->operand();
    const auto cap = rd.capture_index_at(step);
    const int nl = static_cast<int>(d.meta.linears.size());
    std::vector<const Log2Histogram*> hists(nl, nullptr), present;
    QVector<double> lk, kv;
    for (int l = 0; l < nl; ++l)
        if (const trace::OperandRecord* o = rd.operand(cap, {l, sel.gemm, sel.operand})) {
            hists[l] = &o->stats.histogram;
            present.push_back(hists[l]);
            lk << l;
            kv << o->stats.outliers.kurtosis;
        }
    QCPColorMap* map = color_map(layers_);
    int lo, hi;
    if (!histogram_extent(present, lo, hi)) {
        map->data()->clear();
        set_placeholder(layers_, tr("no capture at or before this step"));
    } else {
        set_placeholder(layers_, QString());
        map->data()->setSize(hi - lo + 1, nl);
        map->data()->setRange(QCPRange(lo, hi), QCPRange(0, nl - 1));
        for (int l = 0; l < nl; ++l)
            for (int e = lo; e <= hi; ++e)
                map->data()->setCell(e - lo, l, hists[l] ? std::log10(1.0 + hists[l]->count(e)) : 0.0);
        map->rescaleDataRange(true);
    }
    layers_->rescaleAxes();
    QStringList names;
    for (int l = 0; l < nl; ++l) names << linear_label(d.meta, l);
    set_label_ticks(layers_->yAxis, names);
    bars(kurtosis_, series_color(5))->setData(lk, kv);
    fit_axes(kurtosis_);
    kurtosis_->yAxis->setRangeLower(0);
    set_label_ticks(kurtosis_->xAxis, names);
    slant_tick_labels(kurtosis_->xAxis, names, nl > 4 ? 45 : 0);
    set_placeholder(kurtosis_, lk.isEmpty() ? tr("no capture at or before this step") : QString());
}

void OutliersView::drawSteps(const RunData& rd, std::int64_t step) {
    const OperandRef sel = ctx().selection->operand();
    std::vector<const Log2Histogram*> hists;
    std::vector<double> steps;
    for (std::size_t i = 0; i < rd.capture_steps.size() && rd.capture_steps[i] <= std::max<std::int64_t>(step, 0); ++i)
        if (const trace::OperandRecord* o = rd.operand(static_cast<std::ptrdiff_t>(i), sel)) {
            hists.push_back(&o->stats.histogram);
            steps.push_back(static_cast<double>(rd.capture_steps[i]));
        }
    QCPColorMap* map = color_map(steps_);
    int lo, hi;
    if (!histogram_extent(hists, lo, hi)) {
        map->data()->clear();
        set_placeholder(steps_, tr("no captures of this operand yet"));
    } else {
        set_placeholder(steps_, QString());
        const int n = static_cast<int>(hists.size());
        map->data()->setSize(n, hi - lo + 1);
        map->data()->setRange(QCPRange(steps.front(), steps.back()), QCPRange(lo, hi));
        for (int i = 0; i < n; ++i)
            for (int e = lo; e <= hi; ++e) map->data()->setCell(i, e - lo, std::log10(1.0 + hists[i]->count(e)));
        map->rescaleDataRange(true);
    }
    steps_->rescaleAxes();
}

void OutliersView::drawChannels(const TraceData& d, const RunData& rd, std::int64_t step) {
    const OperandRef sel = ctx().selection->operand();
    QVector<double> k, v, ok, ov;
    if (const trace::OperandRecord* o = rd.operand_at(step, sel)) {
        const auto& ch = o->stats.outliers.channel_absmax;
        std::vector<float> sorted(ch.begin(), ch.end());
        std::nth_element(sorted.begin(), sorted.begin() + sorted.size() / 2, sorted.end());
        const double median = sorted.empty() ? 0 : sorted[sorted.size() / 2];
        for (std::size_t c = 0; c < ch.size(); ++c) {
            const bool outlier = median > 0 && ch[c] > kOutlierFactor * median;
            (outlier ? ok : k) << static_cast<double>(c);
            (outlier ? ov : v) << ch[c];
        }
    }
    if (channels_->plottableCount() == 0) {
        bars(channels_, series_color(1));
        auto* red = new QCPBars(channels_->xAxis, channels_->yAxis);
        red->setPen(Qt::NoPen);
        red->setBrush(Qt::red);
    }
    qobject_cast<QCPBars*>(channels_->plottable(0))->setData(k, v);
    qobject_cast<QCPBars*>(channels_->plottable(1))->setData(ok, ov);
    fit_axes(channels_);
    channels_->yAxis->setRangeLower(0);
    set_placeholder(channels_, k.isEmpty() && ok.isEmpty() ? tr("no channel absmax for %1").arg(operand_ref_label(d.meta, sel))
                                                           : QString());
}

void OutliersView::redraw() {
    const int run = ctx().selection->run();
    const std::int64_t step = ctx().cursor->step();
    ctx().store->read([&](const TraceData& d) {
        static const RunData none;
        const RunData& rd = run >= 0 && run < static_cast<int>(d.runs.size()) ? d.runs[run] : none;
        drawLayers(d, rd, step);
        drawSteps(rd, step);
        drawChannels(d, rd, step);
    });
    for (QCustomPlot* p : {layers_, steps_, kurtosis_, channels_}) p->replot();
}

}  // namespace fp8scope::views
