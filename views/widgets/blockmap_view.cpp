// Block heatmaps. The plot's layout is rebuilt on each redraw: one axis rect per quantizer
// in a grid shaped so that the tiles come out as large as the plot allows, then a colour
// scale per format family, all over one value range.
#include "widgets/blockmap_view.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>
#include <vector>

#include "models/display_names.h"
#include "models/model_roles.h"
#include "widgets/plot_style.h"

namespace fp8scope::views {

namespace {
// Columns of the grid of `n` maps of grid_rows x grid_cols tiles in a width x height plot
// that give each tile the most pixels.
int map_columns(int n, int grid_rows, int grid_cols, int width, int height) {
    int best = 1;
    double best_tile = 0;
    for (int c = 1; c <= n; ++c) {
        const int r = (n + c - 1) / c;
        const double tile = std::min(double(width) / c / std::max(1, grid_cols), double(height) / r / std::max(1, grid_rows));
        if (tile > best_tile) { best_tile = tile; best = c; }
    }
    return best;
}

// Ticks on tiles that exist, at most about eight: square tiles widen one axis past the
// grid, and a tick at tile -2 or 6 of a 4-tile grid would only confuse.
void set_tile_ticks(QCPAxis* axis, int tiles) {
    QSharedPointer<QCPAxisTickerText> ticker(new QCPAxisTickerText);
    const int step = std::max(1, (tiles + 7) / 8);
    for (int t = 0; t < tiles; t += step) ticker->addTick(t, QString::number(t));
    axis->setTicker(ticker);
}
}  // namespace

BlockMapView::BlockMapView(const ViewContext& context, QWidget* parent)
    : StoreView(context, "blocks", tr("Block heatmaps"), parent) {
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    auto* row = new QHBoxLayout;
    row->addWidget(new QLabel(tr("show:"), this));
    quantity_ = new QComboBox(this);
    quantity_->addItems({tr("log10 |x| absmax per tile"), tr("log10 scale_inv"), tr("SQNR dB per tile")});
    row->addWidget(quantity_);
    heading_ = new QLabel(this);
    row->addWidget(heading_, 1);
    layout->addLayout(row);
    plot_ = new QCustomPlot(this);
    plot_->setMinimumSize(300, 200);
    margins_ = new QCPMarginGroup(plot_);  // the maps' plotting areas line up across rows
    layout->addWidget(plot_, 1);
    connect(quantity_, &QComboBox::currentIndexChanged, this, [this] { refresh(true); });
}

QString BlockMapView::heading() const { return heading_->text(); }

void BlockMapView::setQuantity(Quantity q) { quantity_->setCurrentIndex(q); }

int BlockMapView::quantityByName(const QString& name) {
    const QStringList names{"absmax", "scale_inv", "sqnr"};
    return static_cast<int>(names.indexOf(name));
}

int BlockMapView::columnsFor(QSize plot) const {
    return map_columns(shape_.maps, shape_.grid_rows, shape_.grid_cols, plot.width() - 80, plot.height());
}

void BlockMapView::resizeEvent(QResizeEvent* e) {
    StoreView::resizeEvent(e);
    if (maps_ > 0 && !one_tile_) refresh();  // the grid and the tiles' aspect follow the plot
}

namespace {
// E5M2 and MX quantizers on one perceptual scale, E4M3 ones on another: the family of a map
// shows in its colours.
bool e5m2_or_mx(const QString& recipe) {
    return recipe.contains("e5m2", Qt::CaseInsensitive) || recipe.startsWith("mxfp8");
}

const std::vector<float>& quantity_of(const trace::BlockMapRecord& b, BlockMapView::Quantity q) {
    return q == BlockMapView::Absmax ? b.absmax : q == BlockMapView::ScaleInv ? b.scale_inv : b.sqnr_db;
}

// log10 for |x| and scale_inv (they span decades), dB as they are.
double shown_value(double v, BlockMapView::Quantity q) {
    return q == BlockMapView::SqnrDb ? v : v > 0 ? std::log10(v) : qQNaN();
}
}  // namespace

void BlockMapView::redraw() {
    const OperandRef sel = ctx().selection->operand();
    const int run = ctx().selection->run();
    const auto quantity = static_cast<Quantity>(quantity_->currentIndex());
    plot_->clearPlottables();
    plot_->clearItems();
    plot_->plotLayout()->clear();
    maps_ = 0;
    one_tile_ = false;
    QString heading;
    ctx().store->read([&](const TraceData& d) {
        if (run < 0 || run >= static_cast<int>(d.runs.size())) return;
        const RunData& rd = d.runs[run];
        const std::int64_t at = rd.blockmap_step_at(ctx().cursor->step(), sel);
        if (at < 0) return;
        heading = tr("%1 at step %2").arg(operand_ref_label(d.meta, sel)).arg(at);
        std::vector<const trace::BlockMapRecord*> maps;
        for (const trace::BlockMapRecord* b : rd.blockmaps_of(at, sel)) {
            const std::size_t cells = static_cast<std::size_t>(b->grid_rows) * b->grid_cols;
            if (b->grid_rows > 0 && b->grid_cols > 0 && quantity_of(*b, quantity).size() >= cells) maps.push_back(b);  // else damaged
        }
        if (maps.empty()) return;
        // |x| per tile is the tensor's, whatever the quantizer: one map says it all.
        if (quantity == Absmax) maps.erase(maps.begin() + 1, maps.end());
        // All quantizers of an operand share one tile grid (the first map's, for the shape).
        const trace::BlockMapRecord& g = *maps.front();
        heading = tr("%1 (%2x%3) at step %4: %5x%6 tiles of %7x%8")
                      .arg(operand_ref_label(d.meta, sel)).arg(g.rows).arg(g.cols).arg(at)
                      .arg(g.grid_rows).arg(g.grid_cols).arg(g.tile_rows).arg(g.tile_cols);
        if (g.grid_rows == 1 && g.grid_cols == 1) {
            // One square per quantizer would say nothing a line of text does not.
            one_tile_ = true;
            QStringList lines{tr("The tensor (%1x%2) is one tile at this block size (tiles of %3x%4): one value per quantizer.")
                                  .arg(g.rows).arg(g.cols).arg(g.tile_rows).arg(g.tile_cols)};
            for (const trace::BlockMapRecord* b : maps)
                lines << QStringLiteral("%1: %2").arg(quantity == Absmax ? tr("|x| absmax") : quantizer_label(d.meta, b->quantizer),
                                                      format_figure(quantity_of(*b, quantity)[0]));
            auto* text = new QCPTextElement(plot_, lines.join('\n'));
            text->setTextFlags(Qt::AlignLeft | Qt::AlignVCenter);
            plot_->plotLayout()->addElement(0, 0, text);
            maps_ = static_cast<int>(maps.size());
            return;
        }
        shape_ = {static_cast<int>(maps.size()), g.grid_rows, g.grid_cols};
        const int columns = columnsFor(plot_->size());
        // The maps in a grid of their own, so that the scales beside it span all its rows.
        auto* grid = new QCPLayoutGrid;
        plot_->plotLayout()->addElement(0, 0, grid);
        auto* scales = new QCPLayoutGrid;
        plot_->plotLayout()->addElement(0, 1, scales);
        QCPColorScale* scale_of[2] = {nullptr, nullptr};  // E4M3 family, E5M2/MX family
        QCPRange range;
        bool any = false;
        QFont tf = font();
        tf.setPointSize(9);
        for (const trace::BlockMapRecord* b : maps) {
            const auto& src = quantity_of(*b, quantity);
            const QString name = quantity == Absmax ? tr("|x| absmax (the same under every quantizer)") : quantizer_label(d.meta, b->quantizer);
            // A title row over each map, not an axis label under it: it cannot run into the
            // tick labels of the row below.
            auto* cell = new QCPLayoutGrid;
            grid->addElement(maps_ / columns, maps_ % columns, cell);
            cell->addElement(0, 0, new QCPTextElement(plot_, name, tf));
            auto* rect = new QCPAxisRect(plot_);
            cell->addElement(1, 0, rect);
            cell->setRowStretchFactor(0, 0.001);
            rect->setMarginGroup(QCP::msLeft | QCP::msRight | QCP::msTop | QCP::msBottom, margins_);
            rect->axis(QCPAxis::atLeft)->setRangeReversed(true);  // row 0 at the top, like the matrix
            set_tile_ticks(rect->axis(QCPAxis::atLeft), b->grid_rows);
            set_tile_ticks(rect->axis(QCPAxis::atBottom), b->grid_cols);
            for (auto type : {QCPAxis::atLeft, QCPAxis::atBottom}) rect->axis(type)->setTickLabelFont(tf);
            auto* map = new QCPColorMap(rect->axis(QCPAxis::atBottom), rect->axis(QCPAxis::atLeft));
            map->setInterpolate(false);
            fill_cells(map, b->grid_cols, b->grid_rows, [&](int c, int r) {
                return shown_value(src[static_cast<std::size_t>(r) * b->grid_cols + c], quantity);
            });
            if (QCPRange r; finite_range(map, &r)) {
                range = any ? QCPRange(std::min(range.lower, r.lower), std::max(range.upper, r.upper)) : r;
                any = true;
            }
            const int family = quantity != Absmax && e5m2_or_mx(quantizer_label(d.meta, b->quantizer)) ? 1 : 0;
            if (!scale_of[family]) {
                scale_of[family] = new QCPColorScale(plot_);
                scale_of[family]->setType(QCPAxis::atRight);
                // SQNR is a statistic with a good side: the goodness scale of every view.
                scale_of[family]->setGradient(quantity == SqnrDb ? goodness_gradient(Better::Higher)
                                              : family           ? magma_gradient()
                                                                 : viridis_gradient());
                scale_of[family]->axis()->setLabel(quantity_->currentText() + (quantity == Absmax ? QString()
                                                   : family ? tr(" (E5M2, MX)") : tr(" (E4M3)")));
                scales->addElement(scales->elementCount(), 0, scale_of[family]);
            }
            map->setColorScale(scale_of[family]);  // the map takes the scale's gradient
            // Whole cells at the edges: the data range runs between the outer cells' centres.
            rect->axis(QCPAxis::atBottom)->setRange(-0.5, b->grid_cols - 0.5);
            rect->axis(QCPAxis::atLeft)->setRange(-0.5, b->grid_rows - 0.5);
            ++maps_;
        }
        // One value range for all scales: the same colour position means the same value.
        if (any)
            for (QCPColorScale* sc : scale_of)
                if (sc) sc->setDataRange(range);
    });
    heading_->setText(maps_ ? heading : tr("no block maps of the selected operand at or before this step"));
    plot_->replot();  // lays the axis rects out
    squareTiles();
    plot_->replot();
}

// Square tiles: the axis that would stretch them gets a wider range (white margins)
// instead, so an 8x1 grid is a column, not eight wide bands.
void BlockMapView::squareTiles() {
    for (QCPAxisRect* rect : plot_->axisRects()) {
        QCPAxis *x = rect->axis(QCPAxis::atBottom), *y = rect->axis(QCPAxis::atLeft);
        if (rect->width() <= 0 || rect->height() <= 0) continue;
        const double data_aspect = x->range().size() / y->range().size();
        const double rect_aspect = double(rect->width()) / rect->height();
        if (data_aspect < rect_aspect) x->setScaleRatio(y, 1.0);
        else y->setScaleRatio(x, 1.0);
    }
}

}  // namespace fp8scope::views
