// Amax and scale view.
#include "amax_view.h"

#include <QVBoxLayout>
#include <cmath>

#include "display_names.h"
#include "fp8/recipe.h"
#include "plot_style.h"

namespace fp8scope::views {

double recipe_fp8_max(const std::string& recipe) {
    try {
        return fp8_max(recipe_format(parse_recipe(recipe)));
    } catch (const std::exception&) {
        return fp8_max(Format::E4M3);
    }
}

AmaxView::AmaxView(const ViewContext& context, QWidget* parent) : StoreView(context, "amax", tr("Amax and scale"), parent) {
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
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

    auto* amax = plot_->addGraph();
    amax->setName(tr("amax"));
    amax->setPen(QPen(series_color(1), 1.2));
    auto* scale = plot_->addGraph(plot_->xAxis, plot_->yAxis2);
    scale->setName(tr("scale in use (right)"));
    scale->setPen(QPen(series_color(3), 1.2));
    auto* history = plot_->addGraph();
    history->setName(tr("delayed amax history at cursor"));
    history->setLineStyle(QCPGraph::lsNone);
    history->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, series_color(4), 7));
    auto* overflow = plot_->addGraph();
    overflow->setName(tr("overflow (amax x scale > fp8 max)"));
    overflow->setLineStyle(QCPGraph::lsNone);
    overflow->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssTriangleInverted, Qt::red, Qt::red, 8));
    cursor_line_ = add_cursor_line(plot_);
    window_->setLayer(cursor_layer(plot_));
    history->setLayer(cursor_layer(plot_));
    plot_->legend->setVisible(true);
    plot_->axisRect()->insetLayout()->setInsetAlignment(0, Qt::AlignTop | Qt::AlignLeft);
}

void AmaxView::redraw() {
    const OperandRef ref = ctx().selection->operand();
    const int run = ctx().selection->run();
    const std::int64_t step = ctx().cursor->step();
    bool rebuild = dataChanged() || !(ref == shown_) || run != shown_run_;
    ctx().store->read([&](const TraceData& d) {
        const bool ok = run >= 0 && run < static_cast<int>(d.runs.size()) && ref.slot() >= 0 && ref.slot() < d.slot_count();
        if (!ok) {
            rebuild = true;
            for (int g = 0; g < plot_->graphCount(); ++g) plot_->graph(g)->data()->clear();
            set_placeholder(plot_, d.empty() ? tr("no steps yet") : tr("select an operand"));
            window_->setVisible(false);
            return;
        }
        set_placeholder(plot_, QString());
        const RunData& rd = d.runs[run];
        const int slot = ref.slot();
        if (rebuild) {
            const ScalingColumns& sc = rd.scaling;
            const std::size_t n = sc.step.size();
            QVector<double> k(sc.step.begin(), sc.step.end()), a(n), s(n), ok_k, ok_v;
            // The format's maximum comes from the recipe in use at the newest capture.
            const trace::OperandRecord* last = rd.operand_at(d.last_step, ref);
            const double fmax = last && last->recipe_in_use >= 0 && last->recipe_in_use < int(d.meta.recipes.size())
                                    ? recipe_fp8_max(d.meta.recipes[last->recipe_in_use]) : fp8_max(Format::E4M3);
            for (std::size_t i = 0; i < n; ++i) {
                a[i] = sc.amax_at(i, slot);
                s[i] = sc.scale_at(i, slot);
                if (std::isfinite(s[i]) && a[i] * s[i] > fmax) { ok_k << k[i]; ok_v << a[i]; }
            }
            plot_->graph(AmaxGraph)->setData(k, gaps_for_log(a), true);
            plot_->graph(ScaleGraph)->setData(k, gaps_for_log(s), true);
            plot_->graph(OverflowGraph)->setData(ok_k, ok_v, true);
            plot_->graph(AmaxGraph)->setName(tr("amax of %1 (%2)").arg(operand_ref_label(d.meta, ref), run_label(d.meta, run)));
            fit_axes(plot_);
        }
        // History window: the previous steps' amax as delayed scaling saw them.
        QVector<double> hk, hv;
        if (const trace::OperandRecord* o = rd.operand_at(step, ref); o && !o->amax_history.empty()) {
            const auto n = static_cast<std::int64_t>(o->amax_history.size());
            for (std::int64_t i = 0; i < n; ++i) {
                hk << static_cast<double>(o->key.step - n + i);
                hv << o->amax_history[i];
            }
            window_->topLeft->setCoords(static_cast<double>(o->key.step - n), 0);
            window_->bottomRight->setCoords(static_cast<double>(o->key.step), 1);
        }
        window_->setVisible(!hk.isEmpty());
        plot_->graph(HistoryGraph)->setData(hk, gaps_for_log(hv), true);
    });
    shown_ = ref;
    shown_run_ = run;
    set_cursor_line(cursor_line_, static_cast<double>(step));
    rebuild ? plot_->replot() : replot_cursor_layer(plot_);
}

}  // namespace fp8scope::views
