// Quantization error view.
#include "widgets/error_view.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QVBoxLayout>
#include <cmath>

#include "models/display_names.h"
#include "widgets/plot_style.h"

namespace fp8scope::views {

ErrorView::ErrorView(const ViewContext& context, QWidget* parent)
    : StoreView(context, "error", tr("Quantization error"), parent), model_(context.store) {
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    auto* row = new QHBoxLayout;
    row->addWidget(new QLabel(tr("statistic:"), this));
    stat_ = new QComboBox(this);
    for (int s = 0; s < kErrorStatCount; ++s) stat_->addItem(QString::fromLatin1(error_stat_name(ErrorStat(s))));
    row->addWidget(stat_);
    row->addStretch();
    layout->addLayout(row);
    bars_ = make_plot(this, tr("per layer, every recipe, at cursor"));
    steps_ = make_plot(this, tr("selected operand over capture steps"));
    layout->addWidget(bars_, 3);
    layout->addWidget(steps_, 2);
    place_legend_below(bars_, 5);  // 13 recipes side by side leave no free corner inside
    steps_->xAxis->setLabel(tr("step"));
    cursor_line_ = add_cursor_line(steps_);
    stat_->setCurrentIndex(static_cast<int>(context.selection->stat()));
    connect(stat_, &QComboBox::currentIndexChanged, this, [this](int i) { ctx().selection->setStat(ErrorStat(i)); });
    connect(context.selection, &Selection::changed, this,
            [this] { stat_->setCurrentIndex(static_cast<int>(ctx().selection->stat())); });
}

void ErrorView::drawBars() {
    bars_->clearPlottables();
    auto* group = new QCPBarsGroup(bars_);
    const int n = model_.recipeCount(), rows = model_.rowCount();
    // A linear's bars share 0.8 of its slot, gaps in plot units too: pixel gaps would push
    // 13 narrow bars into the neighbouring linear's slot.
    const double width = 0.7 / std::max(1, n);
    group->setSpacingType(QCPBarsGroup::stPlotCoords);
    group->setSpacing(0.1 / std::max(1, n));
    QStringList linears;
    for (int l = 0; l < rows; ++l) linears << model_.data(model_.index(l, 0), Qt::DisplayRole).toString();
    for (int r = 0; r < n; ++r) {
        auto* b = new QCPBars(bars_->xAxis, bars_->yAxis);
        b->setName(model_.recipeName(r));
        b->setWidth(width);
        b->setPen(Qt::NoPen);
        b->setBrush(colors_.value(r));
        b->setBarsGroup(group);
        QVector<double> k, v;
        for (int l = 0; l < rows; ++l)
            if (const double x = model_.value(l, r); std::isfinite(x)) { k << l; v << x; }
        b->setData(k, v);
    }
    wrap_legend(bars_);
    fit_axes(bars_);
    set_label_ticks(bars_->xAxis, linears);
    slant_tick_labels(bars_->xAxis, linears, rows > 6 ? 60 : 0);
    bars_->yAxis->setLabel(stat_->currentText());
    set_placeholder(bars_, rows == 0 || n == 0 ? tr("no analysis recipes in this trace") : QString());
}

void ErrorView::drawSteps(const TraceData& d) {
    steps_->clearGraphs();
    const int run = ctx().selection->run();
    const OperandRef sel = ctx().selection->operand();
    const ErrorStat stat = ctx().selection->stat();
    if (run < 0 || run >= static_cast<int>(d.runs.size())) return;
    const RunData& rd = d.runs[run];
    for (int r = 0; r < static_cast<int>(d.meta.recipes.size()); ++r) {
        QVector<double> k, v;
        for (std::size_t i = 0; i < rd.capture_steps.size(); ++i)
            if (const trace::OperandRecord* o = rd.operand(static_cast<std::ptrdiff_t>(i), sel);
                o && r < static_cast<int>(o->errors.size())) {
                k << static_cast<double>(rd.capture_steps[i]);
                v << error_stat_value(o->errors[r], stat);
            }
        QCPGraph* g = steps_->addGraph();
        g->setName(recipe_label(d.meta, r));
        g->setPen(QPen(colors_.value(r), 1.2));
        g->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, 4));
        g->setData(k, v, true);
    }
    fit_axes(steps_);
    steps_->yAxis->setLabel(QString::fromLatin1(error_stat_name(stat)));
    set_placeholder(steps_, rd.capture_steps.empty() ? tr("no capture steps yet") : QString());
}

void ErrorView::redraw() {
    const OperandRef sel = ctx().selection->operand();
    model_.refresh(ctx().selection->run(), ctx().cursor->step(), sel.gemm, sel.operand, ctx().selection->stat());
    ctx().store->read([&](const TraceData& d) {
        colors_ = recipe_colors(d.meta.recipes);
        drawBars();
        bars_->xAxis->setLabel(tr("linear (%1 %2)").arg(gemm_label(sel.gemm), operand_label(sel.operand)));
        drawSteps(d);
    });
    set_cursor_line(cursor_line_, static_cast<double>(ctx().cursor->step()));
    bars_->replot();
    steps_->replot();
}

}  // namespace fp8scope::views
