// Quantization error view. The heatmap is a QCPColorMap of quantizers (x) by linears (y,
// the first at the top); a quantizer in use gets a black frame on its cell.
#include "widgets/error_view.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>
#include <functional>

#include "models/display_names.h"
#include "models/model_roles.h"
#include "models/quantizer_facts.h"
#include "widgets/compare_run_combo.h"
#include "widgets/event_markers.h"
#include "widgets/plot_interaction.h"
#include "widgets/plot_style.h"
#include "widgets/recipe_combo.h"

namespace fp8scope::views {

namespace {
constexpr char kOutline[] = "in_use_outline";
constexpr char kCellText[] = "cell_text";
constexpr char kVoidCell[] = "void_cell";
constexpr int kMinTextCellPx = 34;  // narrower cells show their values on hover only
QString operand_steps_title() { return ErrorView::tr("selected operand over capture steps"); }
QString operand_heat_title() { return ErrorView::tr("per layer and quantizer, at cursor (black frame: quantizer in use)"); }
}

ErrorView::ErrorView(const ViewContext& context, QWidget* parent)
    : StoreView(context, "error", tr("Quantization error"), parent), model_(context.store), output_model_(context.store) {
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    auto* row = new QHBoxLayout;
    row->addWidget(new QLabel(tr("statistic:"), this));
    stat_ = new QComboBox(this);
    for (int s = 0; s < kErrorStatCount; ++s) stat_->addItem(QString::fromLatin1(error_stat_name(ErrorStat(s))));
    for (int s = 0; s < kOutputStatCount; ++s) stat_->addItem(QString::fromLatin1(output_stat_name(OutputStat(s))));
    row->addWidget(stat_);
    mode_ = new QComboBox(this);
    mode_->addItems({tr("difference to"), tr("values"), tr("compared run's values"), tr("minus compared run")});
    row->addWidget(mode_);
    reference_ = new QComboBox(this);
    reference_->setSizeAdjustPolicy(QComboBox::AdjustToContents);
    row->addWidget(reference_);
    row->addWidget(new QLabel(tr("compare with:"), this));
    compare_ = new CompareRunCombo(this);
    row->addWidget(compare_);
    row->addStretch();
    layout->addLayout(row);
    heat_ = make_plot(this, operand_heat_title());
    steps_ = make_plot(this, operand_steps_title());
    layout->addWidget(heat_, 3);
    layout->addWidget(steps_, 2);
    map_ = new QCPColorMap(heat_->xAxis, heat_->yAxis);
    map_->setInterpolate(false);
    map_->setTightBoundary(false);
    auto* scale = new QCPColorScale(heat_);
    heat_->plotLayout()->addElement(heat_->plotLayout()->rowCount() - 1, 1, scale);
    map_->setColorScale(scale);
    heat_->yAxis->setRangeReversed(true);  // the first linear at the top, as in the layers table
    heat_->setInteractions({});           // cells do not pan or zoom
    PlotInteraction::attach(heat_, nullptr)->setDescriber([this](QCPAxisRect*, double key, double value) {
        return cellText(static_cast<int>(std::lround(value)), static_cast<int>(std::lround(key)));
    });
    place_legend_below(steps_, 5);
    steps_->xAxis->setLabel(tr("step"));
    cursor_line_ = add_cursor_line(steps_);
    PlotInteraction::attach(steps_, context.cursor);
    stat_->setCurrentIndex(static_cast<int>(context.selection->stat()));
    connect(stat_, &QComboBox::currentIndexChanged, this, [this](int i) {
        if (i < kErrorStatCount) ctx().selection->setStat(ErrorStat(i));
        else refresh(true);  // an output statistic is this view's own
    });
    connect(context.selection, &Selection::changed, this, [this] {
        if (!showsOutput()) stat_->setCurrentIndex(static_cast<int>(ctx().selection->stat()));
    });
    connect(mode_, &QComboBox::currentIndexChanged, this, [this] { refresh(true); });
    connect(reference_, &QComboBox::currentIndexChanged, this, [this] { refresh(true); });
    connect(compare_, &QComboBox::currentIndexChanged, this, [this] { refresh(true); });
}

void ErrorView::setMode(Mode mode) { mode_->setCurrentIndex(mode); }
void ErrorView::showOutputStat(OutputStat stat) { stat_->setCurrentIndex(kErrorStatCount + static_cast<int>(stat)); }
bool ErrorView::showStatistic(const QString& name) {
    const int i = stat_->findText(name);
    if (i >= 0) stat_->setCurrentIndex(i);
    return i >= 0;
}
bool ErrorView::showsOutput() const { return stat_->currentIndex() >= kErrorStatCount; }

QString ErrorView::outputCellText(int linear, int gemm) const {
    if (linear < 0 || linear >= output_model_.rowCount() || gemm < 0 || gemm > 2) return {};
    const std::int64_t step = output_model_.step(linear, gemm);
    if (step < 0)
        return tr("%1 %2\nno output error captured").arg(output_model_.linearName(linear), gemm_label(Gemm(gemm)));
    return tr("%1 %2\n%3: %4 (step %5)\nthe GEMM of the cast operands against the unquantized GEMM\n"
              "(SQNR = 10 log10(sum ref^2 / sum (out - ref)^2), rel. error = ||out - ref|| / ||ref||)")
        .arg(output_model_.linearName(linear), gemm_label(Gemm(gemm)), outputStatLabel(),
             format_figure(output_model_.value(linear, gemm)))
        .arg(step);
}

void ErrorView::setReference(int recipe) { reference_->setCurrentIndex(recipe); }

QString ErrorView::cellText(int linear, int recipe) const {
    if (showsOutput()) return outputCellText(linear, recipe);
    if (linear < 0 || linear >= model_.rowCount() || recipe < 0 || recipe >= model_.recipeCount()) return {};
    if (!model_.applies(linear, recipe))
        return QStringLiteral("%1\n%2").arg(model_.linearName(linear), model_.voidReason(linear, recipe));
    QString s = QStringLiteral("%1\n%2\n%3: %4").arg(model_.linearName(linear), model_.recipeName(recipe), stat_->currentText(),
                                                    format_figure(model_.rawValue(linear, recipe)));
    if (model_.runCompare() != RecipeErrorModel::RunCompare::Off) s += QStringLiteral(" (%1)").arg(model_.compareLabel());
    if (const QString note = model_.shapeNote(linear); !note.isEmpty()) s += QStringLiteral("\n") + note;
    if (model_.reference() >= 0)
        s += tr("\n- %1: %2").arg(model_.recipeName(model_.reference()), format_figure(model_.value(linear, recipe)));
    if (model_.recipeInUse(linear) == recipe) s += tr("\n(quantizer in use)");
    // What the operands' error does to the GEMM's output, under the recipe in use.
    const Gemm gemm = ctx().selection->operand().gemm;
    if (const double v = output_model_.value(linear, static_cast<int>(gemm)); !std::isnan(v))
        s += tr("\n%1 output SQNR: %2 dB").arg(gemm_label(gemm), format_figure(v));
    return s;
}

QVector<QPoint> ErrorView::outlinedCells() const { return cellsOf(kOutline); }
QVector<QPoint> ErrorView::voidCells() const { return cellsOf(kVoidCell); }

QVector<QPoint> ErrorView::cellsOf(const char* kind) const {
    QVector<QPoint> cells;
    for (int i = 0; i < heat_->itemCount(); ++i)
        if (auto* r = qobject_cast<QCPItemRect*>(heat_->item(i)); r && r->objectName() == kind) {
            const QPointF c = (r->topLeft->coords() + r->bottomRight->coords()) / 2;
            cells << QPoint(static_cast<int>(std::lround(c.x())), static_cast<int>(std::lround(c.y())));
        }
    return cells;
}

namespace {

void remove_cell_items(QCustomPlot* heat) {
    for (int i = heat->itemCount() - 1; i >= 0; --i)
        if (const QString kind = heat->item(i)->objectName(); kind == kOutline || kind == kCellText || kind == kVoidCell)
            heat->removeItem(i);
}

// The values in the cells, dark on light colours and light on dark ones, when they fit.
void write_cell_values(QCustomPlot* heat, QCPColorMap* map, const QFont& base, int cols, int rows,
                       const std::function<double(int c, int r)>& value) {
    if (cols <= 0 || heat->axisRect()->width() / cols < kMinTextCellPx) return;
    QFont small = base;
    small.setPointSize(7);
    for (int l = 0; l < rows; ++l)
        for (int c = 0; c < cols; ++c) {
            const double v = value(c, l);
            if (!std::isfinite(v)) continue;
            auto* text = new QCPItemText(heat);
            text->setObjectName(kCellText);
            text->setClipToAxisRect(true);
            text->setFont(small);
            text->position->setCoords(c, l);
            text->setText(QString::number(v, 'g', 3));
            const QColor cell = QColor::fromRgb(map->gradient().color(v, map->dataRange()));
            text->setColor(cell.lightnessF() > 0.55 ? Qt::black : Qt::white);
        }
}

}  // namespace

QString ErrorView::outputStatLabel() const {
    return output_model_.stat() == OutputStat::Sqnr ? tr("output SQNR (dB, higher is better)")
                                                     : tr("output rel. error (lower is better)");
}

void ErrorView::drawOutputHeatmap(const TraceData& d, int run) {
    remove_cell_items(heat_);
    const int rows = output_model_.rowCount();
    const bool sqnr = output_model_.stat() == OutputStat::Sqnr;
    // A GEMM without a quantized operand has no error (SQNR +inf, rel. error 0): no colour
    // (NaN is transparent), the word "exact" instead.
    const auto exact = [this, sqnr](int l, int g) {
        return output_model_.step(l, g) >= 0 && output_model_.value(l, g) == (sqnr ? INFINITY : 0.0);
    };
    const auto value = [this, exact](int c, int r) { return exact(r, c) ? NAN : output_model_.value(r, c); };
    fill_cells(map_, 3, rows, value);
    map_->colorScale()->setGradient(goodness_gradient(sqnr ? Better::Higher : Better::Lower));
    map_->setGradient(map_->colorScale()->gradient());
    QCPRange range;
    const bool coloured = finite_range(map_, &range);
    if (coloured) map_->setDataRange(range);
    map_->colorScale()->setVisible(coloured);
    map_->colorScale()->axis()->setLabel(outputStatLabel());
    write_cell_values(heat_, map_, font(), 3, rows, value);
    QFont small = font();
    small.setPointSize(7);
    for (int l = 0; l < rows; ++l)
        for (int g = 0; g < 3; ++g)
            if (exact(l, g)) {
                auto* text = new QCPItemText(heat_);
                text->setObjectName(kCellText);
                text->setClipToAxisRect(true);
                text->setFont(small);
                text->position->setCoords(g, l);
                text->setText(tr("exact"));
                text->setColor(Qt::darkGray);
            }
    QStringList gemms, linears;
    for (int g = 0; g < 3; ++g) gemms << gemm_label(Gemm(g));
    for (int l = 0; l < rows; ++l) linears << output_model_.linearName(l);
    set_label_ticks(heat_->xAxis, gemms);
    set_label_ticks(heat_->yAxis, linears);
    slant_tick_labels(heat_->xAxis, gemms, 0);
    heat_->xAxis->setLabel(tr("GEMM (fprop Y = X W^T, dgrad dX = dY W, wgrad dW = dY^T X)"));
    // The title answers "which GEMM's output is most damaged": the worst cell, named.
    int worst_l = -1, worst_g = -1;
    std::int64_t step = -1;
    for (int l = 0; l < rows; ++l)
        for (int g = 0; g < 3; ++g) {
            const double v = output_model_.value(l, g);
            if (std::isnan(v)) continue;
            step = std::max(step, output_model_.step(l, g));
            if (worst_l < 0 || (sqnr ? v < output_model_.value(worst_l, worst_g) : v > output_model_.value(worst_l, worst_g)))
                worst_l = l, worst_g = g;
        }
    const QString who = run >= 0 && run < static_cast<int>(d.meta.runs.size()) ? run_label(d.meta, run) : QString();
    QString title = tr("GEMM output error of run %1 at capture step %2: the GEMM of the cast operands against the "
                       "same GEMM unquantized")
                        .arg(who)
                        .arg(step);
    if (worst_l >= 0) {
        const double v = output_model_.value(worst_l, worst_g);
        title += std::isfinite(v) && v != 0.0
                     ? tr("\nmost damaged: %1 %2, %3 %4")
                           .arg(output_model_.linearName(worst_l), gemm_label(Gemm(worst_g)),
                                sqnr ? tr("SQNR") : tr("rel. error"), format_figure(v))
                           .append(sqnr ? tr(" dB") : QString())
                     : tr("\nno quantized operand: every output exact");
    }
    set_title(heat_, step >= 0 ? title : tr("GEMM output error per layer and GEMM"));
    set_placeholder(heat_, step >= 0 ? QString() : tr("no GEMM output errors in this trace at or before the cursor"));
    map_->setVisible(rows > 0);
}

void ErrorView::drawHeatmap() {
    remove_cell_items(heat_);
    const int n = model_.recipeCount(), rows = model_.rowCount();
    const bool run_diff = model_.runCompare() == RecipeErrorModel::RunCompare::Difference;
    const bool diff = run_diff || (mode_->currentIndex() == QuantizerDifference && model_.reference() >= 0);
    const QStringList& recipes = model_.recipeNames();
    QStringList linears;
    for (int l = 0; l < rows; ++l) linears << model_.linearName(l);
    fill_cells(map_, n, rows, [this](int c, int r) { return model_.value(r, c); });
    // Cells that do not apply are NaN: out of the colour range, greyed below.
    map_->colorScale()->setGradient(goodness_gradient(better_of(ctx().selection->stat())));
    map_->setGradient(map_->colorScale()->gradient());
    if (QCPRange range; finite_range(map_, &range)) {
        // Differences: white at zero, so better and worse show at a glance.
        const double m = std::max(std::abs(range.lower), std::abs(range.upper));
        map_->setDataRange(diff ? QCPRange(-m, m) : range);
    }
    map_->colorScale()->axis()->setLabel(
        run_diff ? tr("%1: %2").arg(stat_->currentText(), model_.compareLabel())
        : diff   ? tr("%1 - %2").arg(stat_->currentText(), model_.recipeName(model_.reference()))
        : model_.runCompare() == RecipeErrorModel::RunCompare::OtherRun ? tr("%1 (%2)").arg(stat_->currentText(), model_.compareLabel())
                                                                         : stat_->currentText());
    for (int l = 0; l < rows; ++l)
        for (int r = 0; r < n; ++r)
            if (!model_.applies(l, r)) {
                auto* cell = new QCPItemRect(heat_);
                cell->setObjectName(kVoidCell);
                cell->setPen(Qt::NoPen);
                cell->setBrush(QBrush(QColor(0xbd, 0xbd, 0xbd), Qt::BDiagPattern));
                cell->setClipToAxisRect(true);
                cell->topLeft->setCoords(r - 0.5, l - 0.5);
                cell->bottomRight->setCoords(r + 0.5, l + 0.5);
            }
    for (int l = 0; l < rows; ++l)
        if (const int r = model_.recipeInUse(l); r >= 0) {
            auto* frame = new QCPItemRect(heat_);
            frame->setObjectName(kOutline);
            frame->setPen(QPen(Qt::black, 2));
            frame->setBrush(Qt::NoBrush);
            frame->setClipToAxisRect(true);
            frame->topLeft->setCoords(r - 0.5, l - 0.5);
            frame->bottomRight->setCoords(r + 0.5, l + 0.5);
        }
    write_cell_values(heat_, map_, font(), n, rows, [this](int c, int r) { return model_.value(r, c); });
    set_label_ticks(heat_->xAxis, recipes);
    set_label_ticks(heat_->yAxis, linears);
    slant_tick_labels(heat_->xAxis, recipes, n > 4 ? 45 : 0);
    set_placeholder(heat_, rows == 0 || n == 0 ? tr("no analysis quantizers in this trace") : QString());
    map_->setVisible(rows > 0 && n > 0);
}

void ErrorView::drawRunSteps(const TraceData& d, int run, Qt::PenStyle style) {
    const OperandRef sel = ctx().selection->operand();
    const ErrorStat stat = ctx().selection->stat();
    const RunData& rd = d.runs[run];
    for (int r = 0; r < static_cast<int>(d.meta.quantizers.size()); ++r) {
        QVector<double> k, v;
        int void_steps = 0;
        for (std::size_t i = 0; i < rd.capture_steps.size(); ++i)
            if (const OperandSummary* o = rd.operand(static_cast<std::ptrdiff_t>(i), sel);
                o && r < static_cast<int>(o->errors().size())) {
                if (!what_if_applies(d.meta.quantizers[r], r == o->recipe_in_use)) {
                    ++void_steps;
                    continue;
                }
                k << static_cast<double>(rd.capture_steps[i]);
                v << error_stat_value(o->errors()[r], stat);
            }
        QCPGraph* g = steps_->addGraph();
        g->setName(quantizer_label(d.meta, r) + (k.isEmpty() && void_steps > 0 ? tr(" (n/a)") : QString()));
        g->setPen(QPen(colors_.value(r), 1.2, style));
        g->setScatterStyle(QCPScatterStyle(style == Qt::SolidLine ? QCPScatterStyle::ssDisc : QCPScatterStyle::ssCircle, 4));
        g->setData(k, v, true);
    }
}

void ErrorView::drawSteps(const TraceData& d) {
    steps_->clearGraphs();
    const int run = ctx().selection->run();
    const ErrorStat stat = ctx().selection->stat();
    if (run < 0 || run >= static_cast<int>(d.runs.size())) return;
    const int other = model_.otherRun();
    const bool compared = other >= 0 && other < static_cast<int>(d.runs.size());
    drawRunSteps(d, run, Qt::SolidLine);
    if (compared) {
        // The other run's lines keep their quantizers' colours, dashed; one legend entry
        // says which run is which instead of a second entry per quantizer.
        const int first = steps_->graphCount();
        drawRunSteps(d, other, Qt::DashLine);
        for (int i = first; i < steps_->graphCount(); ++i) steps_->graph(i)->removeFromLegend();
        QCPGraph* key = steps_->addGraph();
        key->setName(tr("solid: %1, dashed: %2").arg(run_label(d.meta, run), run_label(d.meta, other)));
        key->setPen(QPen(Qt::darkGray, 1.2, Qt::DashLine));
    }
    wrap_legend(steps_);
    fit_axes(steps_);
    mark_events(steps_, d, run);
    steps_->yAxis->setLabel(QString::fromLatin1(error_stat_name(stat)));
    set_placeholder(steps_, d.runs[run].capture_steps.empty() ? tr("no capture steps yet") : QString());
}

void ErrorView::drawOutputSteps(const TraceData& d) {
    steps_->clearGraphs();
    const int run = ctx().selection->run(), linear = ctx().selection->operand().linear;
    if (run < 0 || run >= static_cast<int>(d.runs.size())) return;
    const OutputStat stat = output_model_.stat();
    const QColor colors[] = {QColor(31, 119, 180), QColor(255, 127, 14), QColor(44, 160, 44)};
    bool any = false;
    for (int g = 0; g < 3; ++g) {
        QVector<double> k, v;
        for (const auto& r : d.runs[run].gemm_errors)
            if (r.linear == linear && r.gemm == Gemm(g) && std::isfinite(output_stat_value(r, stat))) {
                k << static_cast<double>(r.step);
                v << output_stat_value(r, stat);
            }
        any = any || !k.isEmpty();
        QCPGraph* graph = steps_->addGraph();
        graph->setName(gemm_label(Gemm(g)));
        graph->setPen(QPen(colors[g], 1.2));
        graph->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, 4));
        graph->setData(k, v, true);
    }
    wrap_legend(steps_);
    fit_axes(steps_);
    mark_events(steps_, d, run);
    steps_->yAxis->setLabel(outputStatLabel());
    set_title(steps_, tr("%1: GEMM outputs over capture steps").arg(output_model_.linearName(linear)));
    set_placeholder(steps_, any ? QString() : tr("no finite output errors for this layer (unquantized GEMMs are exact)"));
}

void ErrorView::redraw() {
    const OperandRef sel = ctx().selection->operand();
    const int run = ctx().selection->run();
    if (dataChanged()) ctx().store->read([&](const TraceData& d) { compare_->fill(d.meta); });
    const int mode = mode_->currentIndex();
    const auto compare = mode == OtherRunValues ? RecipeErrorModel::RunCompare::OtherRun
                         : mode == RunDifference ? RecipeErrorModel::RunCompare::Difference
                                                 : RecipeErrorModel::RunCompare::Off;
    model_.refresh(run, ctx().cursor->step(), sel.gemm, sel.operand, ctx().selection->stat(), compare_->otherThan(run), compare);
    const bool output = showsOutput();
    output_model_.refresh(run, ctx().cursor->step(),
                          output ? OutputStat(stat_->currentIndex() - kErrorStatCount) : OutputStat::Sqnr);
    fill_recipe_combo(reference_, model_.recipeNames());
    // The output statistics have one figure per GEMM: no quantizer or run to compare.
    mode_->setEnabled(!output);
    compare_->setEnabled(!output);
    reference_->setEnabled(!output && mode == QuantizerDifference);
    model_.setReference(mode == QuantizerDifference ? reference_->currentIndex() : -1);
    ctx().store->read([&](const TraceData& d) {
        colors_ = recipe_colors(d.meta.quantizers);
        if (output) {
            drawOutputHeatmap(d, run);
            heat_->yAxis->setLabel(tr("linear (GEMM output)"));
            drawOutputSteps(d);
        } else {
            set_title(heat_, operand_heat_title());
            map_->colorScale()->setVisible(true);
            heat_->xAxis->setLabel(QString());
            drawHeatmap();
            heat_->yAxis->setLabel(tr("linear (%1 %2)").arg(gemm_label(sel.gemm), operand_label(sel.operand)));
            set_title(steps_, operand_steps_title());
            drawSteps(d);
        }
    });
    set_cursor_line(cursor_line_, static_cast<double>(ctx().cursor->step()));
    heat_->replot();
    steps_->replot();
}

}  // namespace fp8scope::views
