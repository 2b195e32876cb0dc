// Amax and scale view.
#include "widgets/amax_view.h"

#include <QVBoxLayout>
#include <algorithm>
#include <cmath>
#include <optional>
#include <utility>

#include "models/display_names.h"
#include "models/quantizer_facts.h"
#include "models/run_comparison.h"
#include "widgets/compare_run_combo.h"
#include "widgets/event_markers.h"
#include "widgets/plot_interaction.h"
#include "widgets/plot_style.h"
#include "widgets/step_zoom.h"

namespace fp8scope::views {

std::vector<OperandRef> drawn_operands(const std::vector<OperandRef>& selected, const OperandRef& current) {
    std::vector<OperandRef> out = selected;
    if (out.size() <= static_cast<std::size_t>(AmaxView::kMaxOperands)) return out;
    const bool has_current = std::find(out.begin(), out.begin() + AmaxView::kMaxOperands, current) !=
                             out.begin() + AmaxView::kMaxOperands;
    out.resize(AmaxView::kMaxOperands);
    if (!has_current) out.back() = current;  // past the others in slot order: still sorted
    return out;
}

namespace {
// The format comes from the operand's quantizer in use at the newest capture; none before
// the first (a guess would mark every step of an E5M2 operand).
std::optional<Format> format_of(const TraceData& d, const RunData& rd, const OperandRef& ref) {
    const OperandSummary* last = rd.operand_at(d.last_step, ref);
    if (!last || last->recipe_in_use < 0 || last->recipe_in_use >= static_cast<int>(d.meta.quantizers.size()))
        return std::nullopt;
    return quantizer_format(d.meta.quantizers[last->recipe_in_use]);
}

QColor operand_color(int index) { return series_color(1 + index); }  // past the baseline's grey
// The compared run: the baseline's grey, past every operand's colour when it is not.
QColor other_run_color(const trace::TraceMeta& meta, int other) {
    return other == trace::baseline_of(meta) ? series_color(0) : series_color(1 + AmaxView::kMaxOperands);
}
}  // namespace

AmaxView::AmaxView(const ViewContext& context, QWidget* parent) : StoreView(context, "amax", tr("Amax and scale"), parent) {
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    compare_ = add_compare_run_row(layout, this);
    plot_ = make_plot(this, QString());
    layout->addWidget(plot_);
    plot_->xAxis->setLabel(tr("step"));
    plot_->yAxis->setLabel(tr("amax"));
    plot_->yAxis2->setLabel(tr("scale in use"));
    plot_->yAxis2->setVisible(true);
    set_log_axis(plot_->yAxis);
    set_log_axis(plot_->yAxis2);
    window_ = new QCPItemRect(plot_);
    window_->setPen(Qt::NoPen);
    window_->setBrush(QColor(255, 160, 0, 40));
    window_->topLeft->setTypeY(QCPItemPosition::ptAxisRectRatio);
    window_->bottomRight->setTypeY(QCPItemPosition::ptAxisRectRatio);
    window_->setVisible(false);
    history_ = plot_->addGraph();
    history_->setLineStyle(QCPGraph::lsNone);
    cursor_line_ = add_cursor_line(plot_);
    // Under the curves, so that it does not tint their colours, on a buffered layer of its
    // own: when the cursor passes a capture step only that layer is redrawn, not 100k-point
    // curves.
    plot_->addLayer(QStringLiteral("window"), plot_->layer(QStringLiteral("main")), QCustomPlot::limBelow);
    window_layer_ = plot_->layer(QStringLiteral("window"));
    window_layer_->setMode(QCPLayer::lmBuffered);
    window_->setLayer(window_layer_);
    // With the window, under the curves: hollow markers that never hide the amax line.
    history_->setLayer(window_layer_);
    place_legend_below(plot_, 4);
    PlotInteraction::attach(plot_, context.cursor);
    zoom_ = new StepZoom(plot_, plot_->xAxis);
    connect(zoom_, &StepZoom::shown, this, &StoreView::stepsShown);
    connect(compare_, &QComboBox::currentIndexChanged, this, [this] { refresh(true); });
}

void AmaxView::clearCurves() {
    for (const Curve& c : curves_)
        for (QCPGraph* g : c.graphs) plot_->removeGraph(g);
    for (QCPGraph* g : keys_) plot_->removeGraph(g);
    for (QCPGraph*& g : other_)
        if (g) plot_->removeGraph(std::exchange(g, nullptr));
    curves_.clear();
    keys_.clear();
}

void AmaxView::rebuild(const TraceData& d, int run, const std::vector<OperandRef>& refs, std::size_t selected) {
    clearCurves();
    const RunData& rd = d.runs[run];
    const OperandRef current = ctx().selection->operand();
    QColor current_color = operand_color(0);
    bool any_scale = false;
    for (const OperandRef& ref : refs) {
        const int slot = ref.slot();
        if (slot < 0 || slot >= d.slot_count()) continue;
        const QColor color = operand_color(static_cast<int>(curves_.size()));
        if (ref == current) current_color = color;
        Curve c{ref, {plot_->addGraph(), plot_->addGraph(plot_->xAxis, plot_->yAxis2), plot_->addGraph()}};
        c.graphs[AmaxGraph]->setName(short_operand_label(d.meta, ref));
        c.graphs[ScaleGraph]->setName(short_operand_label(d.meta, ref) + tr(" scale"));
        c.graphs[OverflowGraph]->setName(short_operand_label(d.meta, ref) + tr(" overflow"));
        c.graphs[AmaxGraph]->setPen(QPen(color, 1.4));
        c.graphs[ScaleGraph]->setPen(QPen(color, 1.0, Qt::DashLine));
        c.graphs[OverflowGraph]->setLineStyle(QCPGraph::lsNone);
        c.graphs[OverflowGraph]->setScatterStyle(
            QCPScatterStyle(QCPScatterStyle::ssTriangleInverted, color.darker(160), color, 9));
        for (Graph g : {ScaleGraph, OverflowGraph}) c.graphs[g]->removeFromLegend();
        // Every step read whole, and a large trace's other steps decimated (each bucket's
        // largest amax x scale kept, so an overflow there is marked).
        const SlotSeries series = slot_series(rd, slot);
        const std::optional<Format> format = format_of(d, rd, ref);
        QVector<double> over_k, over_v;
        for (qsizetype i = 0; i < series.step.size(); ++i) {
            any_scale = any_scale || std::isfinite(series.scale[i]);
            if (format && cast_saturates(static_cast<float>(series.amax[i]), static_cast<float>(series.scale[i]), *format)) {
                over_k << series.step[i];
                over_v << series.amax[i];
            }
        }
        c.graphs[AmaxGraph]->setData(series.step, gaps_for_log(series.amax), true);
        c.graphs[ScaleGraph]->setData(series.step, gaps_for_log(series.scale), true);
        c.graphs[OverflowGraph]->setData(over_k, over_v, true);
        curves_.push_back(c);
    }
    const int other = compare_->otherThan(run);
    const bool other_scale = drawOther(d, run, other, current);
    any_scale = any_scale || other_scale;
    // Legend entries for what the styles mean, after the operands' names.
    auto key = [this](const QString& name) {
        QCPGraph* g = plot_->addGraph();
        g->setName(name);
        keys_.push_back(g);
        return g;
    };
    // A run without a scale (the float32 baseline, block quantizers) has no right axis.
    plot_->yAxis2->setVisible(any_scale);
    if (any_scale) key(tr("scale in use (dashed, right axis)"))->setPen(QPen(Qt::darkGray, 1.0, Qt::DashLine));
    QCPGraph* overflow = key(tr("overflow: amax x scale rounds past fp8 max"));
    overflow->setLineStyle(QCPGraph::lsNone);
    overflow->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssTriangleInverted, Qt::darkGray, Qt::gray, 9));
    if (selected > curves_.size())
        key(tr("%1 more selected, not drawn (at most %2)").arg(selected - curves_.size()).arg(kMaxOperands))
            ->setPen(Qt::NoPen);
    history_->removeFromLegend();
    history_->addToLegend();
    history_->setName(tr("delayed amax history of %1 at cursor").arg(short_operand_label(d.meta, current)));
    history_->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssCircle, QPen(current_color, 1.2), Qt::NoBrush, 8));
    wrap_legend(plot_);
    mark_events(plot_, d, run);
    plot_->yAxis->setLabel(tr("amax (run %1)").arg(run_label(d.meta, run)));
    zoom_->fit(static_cast<double>(d.first_step), static_cast<double>(d.last_step));
}

// The compared run's amax and scale of the current operand, its name and the selected
// run's in the legend. True when it has a scale to draw.
bool AmaxView::drawOther(const TraceData& d, int run, int other, const OperandRef& current) {
    if (other < 0 || other >= static_cast<int>(d.runs.size())) return false;
    const SlotSeries s = slot_series(d.runs[other], current.slot());
    const QString label = short_operand_label(d.meta, current);
    for (Curve& c : curves_)
        if (c.ref == current) c.graphs[AmaxGraph]->setName(tr("%1 (%2)").arg(label, run_label(d.meta, run)));
    const QString note = shapes_differ_note(d, run, other, current, d.last_step);
    const QColor color = other_run_color(d.meta, other);
    other_[AmaxGraph] = plot_->addGraph();
    other_[AmaxGraph]->setName(tr("%1 (%2)").arg(label, run_label(d.meta, other)) + (note.isEmpty() ? QString() : tr(": shapes differ")));
    other_[AmaxGraph]->setPen(QPen(color, 1.2));
    other_[AmaxGraph]->setData(s.step, gaps_for_log(s.amax), true);
    // A run that records amax only at capture steps (a float32 baseline): its points marked,
    // so the straight lines between them do not pass for steps.
    if (s.step.size() < static_cast<qsizetype>(d.runs[run].scaling.rows()))
        other_[AmaxGraph]->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, 5));
    other_[ScaleGraph] = plot_->addGraph(plot_->xAxis, plot_->yAxis2);
    other_[ScaleGraph]->setName(other_[AmaxGraph]->name() + tr(" scale"));
    other_[ScaleGraph]->setPen(QPen(color, 1.0, Qt::DashLine));
    other_[ScaleGraph]->setData(s.step, gaps_for_log(s.scale), true);
    other_[ScaleGraph]->removeFromLegend();
    return std::any_of(s.scale.begin(), s.scale.end(), [](double v) { return std::isfinite(v); });
}

// The amax history delayed scaling uses at the cursor step: the window's length comes
// from the newest capture at or before it, the amax of the steps before the cursor from
// the per-step scaling records (at a capture step itself, the recorded window). True when
// the window moved.
bool AmaxView::drawHistory(const RunData& rd, std::int64_t step) {
    const QPointF before = window_->topLeft->coords();
    const bool was_visible = window_->visible();
    QVector<double> hk, hv;
    const OperandRef ref = ctx().selection->operand();
    if (const OperandSummary* o = rd.operand_at(step, ref); o && !o->amax_history().empty()) {
        const std::span<const float> history = o->amax_history();
        const auto n = static_cast<std::int64_t>(history.size());
        const ScalingColumns& sc = rd.scaling;
        const int slot = ref.slot();
        if (o->step == step || slot < 0 || slot >= sc.slot_count) {
            for (std::int64_t i = 0; i < n; ++i) {
                hk << static_cast<double>(o->step - n + i);
                hv << history[i];
            }
            step = o->step;
        } else {
            auto row = std::lower_bound(sc.step.begin(), sc.step.end(), static_cast<double>(step - n)) - sc.step.begin();
            for (; row < static_cast<std::ptrdiff_t>(sc.step.size()) && sc.step[row] < static_cast<double>(step); ++row) {
                hk << sc.step[row];
                hv << sc.amax_at(row, slot);
            }
        }
        window_->topLeft->setCoords(static_cast<double>(step - n), 0);
        window_->bottomRight->setCoords(static_cast<double>(step), 1);
    }
    window_->setVisible(!hk.isEmpty());
    history_->setData(hk, gaps_for_log(hv), true);
    return window_->visible() != was_visible || window_->topLeft->coords() != before;
}

void AmaxView::redraw() {
    const Selection& sel = *ctx().selection;
    const OperandRef current = sel.operand();
    const std::vector<OperandRef> refs = drawn_operands(sel.operands(), current);
    const int run = sel.run();
    const std::int64_t step = ctx().cursor->step();
    if (dataChanged()) ctx().store->read([&](const TraceData& d) { compare_->fill(d.meta); });
    const int other = compare_->otherThan(run);
    const bool rebuild_all = dataChanged() || refs != shown_ || !(current == shown_current_) || run != shown_run_ ||
                             other != shown_other_;
    bool replot_all = true, window_moved = false;
    ctx().store->read([&](const TraceData& d) {
        const bool ok = run >= 0 && run < static_cast<int>(d.runs.size()) && current.slot() >= 0 &&
                        current.slot() < d.slot_count();
        if (!ok) {
            clearCurves();
            history_->data()->clear();
            set_placeholder(plot_, d.empty() ? tr("no steps yet") : tr("select an operand"));
            window_->setVisible(false);
            return;
        }
        set_placeholder(plot_, QString());
        if (rebuild_all) rebuild(d, run, refs, sel.operands().size());
        window_moved = drawHistory(d.runs[run], step);
        replot_all = rebuild_all;
    });
    shown_ = refs;
    shown_current_ = current;
    shown_run_ = run;
    shown_other_ = other;
    set_cursor_line(cursor_line_, static_cast<double>(step));
    if (replot_all) {
        plot_->replot();
        return;
    }
    if (window_moved) window_layer_->replot();
    replot_cursor_layer(plot_);
}

}  // namespace fp8scope::views
