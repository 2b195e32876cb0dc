// Block heatmaps. The plot's layout is rebuilt on each redraw: one axis rect per recipe
// in a grid shaped so that the tiles come out as large as the plot allows, then the colour
// scale they share. Values are log10 for |x| and scale_inv (they span decades), dB as they
// are for SQNR.
#include "widgets/blockmap_view.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>
#include <vector>

#include "models/display_names.h"
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

// Integer ticks only: tiles have no half positions.
void set_tile_ticks(QCPAxis* axis) {
    QSharedPointer<QCPAxisTickerFixed> ticker(new QCPAxisTickerFixed);
    ticker->setTickStep(1);
    ticker->setScaleStrategy(QCPAxisTickerFixed::ssMultiples);
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
    if (maps_ > 0 && columnsFor(plot_->size()) != columns_) refresh();
}

void BlockMapView::redraw() {
    const OperandRef sel = ctx().selection->operand();
    const int run = ctx().selection->run();
    const auto quantity = static_cast<Quantity>(quantity_->currentIndex());
    plot_->clearPlottables();
    plot_->clearItems();
    plot_->plotLayout()->clear();
    maps_ = 0;
    QString heading;
    ctx().store->read([&](const TraceData& d) {
        if (run < 0 || run >= static_cast<int>(d.runs.size())) return;
        const RunData& rd = d.runs[run];
        const std::int64_t at = rd.blockmap_step_at(ctx().cursor->step(), sel);
        if (at < 0) return;
        heading = tr("%1 at step %2").arg(operand_ref_label(d.meta, sel)).arg(at);
        auto* scale = new QCPColorScale(plot_);
        scale->setType(QCPAxis::atRight);
        scale->axis()->setLabel(quantity_->currentText());
        // The maps take the scale's gradient when they join it.
        scale->setGradient(quantity == SqnrDb ? QCPColorGradient::gpJet : QCPColorGradient::gpThermal);
        double lo = INFINITY, hi = -INFINITY;
        std::vector<const trace::BlockMapRecord*> maps;
        for (const trace::BlockMapRecord* b : rd.blockmaps_of(at, sel)) {
            const auto& src = quantity == Absmax ? b->absmax : quantity == ScaleInv ? b->scale_inv : b->sqnr_db;
            const std::size_t cells = static_cast<std::size_t>(b->grid_rows) * b->grid_cols;
            if (b->grid_rows > 0 && b->grid_cols > 0 && src.size() >= cells) maps.push_back(b);  // else damaged
        }
        if (maps.empty()) {
            delete scale;
            return;
        }
        // All recipes of an operand share one tile grid (the first map's, for the shape).
        const trace::BlockMapRecord& g = *maps.front();
        heading = tr("%1 (%2x%3) at step %4: %5x%6 tiles of %7x%8")
                      .arg(operand_ref_label(d.meta, sel)).arg(g.rows).arg(g.cols).arg(at)
                      .arg(g.grid_rows).arg(g.grid_cols).arg(g.tile_rows).arg(g.tile_cols);
        shape_ = {static_cast<int>(maps.size()), g.grid_rows, g.grid_cols};
        const int columns = columns_ = columnsFor(plot_->size());
        // The maps in a grid of their own, so that the scale beside it spans all its rows.
        auto* grid = new QCPLayoutGrid;
        plot_->plotLayout()->addElement(0, 0, grid);
        for (const trace::BlockMapRecord* b : maps) {
            const auto& src = quantity == Absmax ? b->absmax : quantity == ScaleInv ? b->scale_inv : b->sqnr_db;
            auto* rect = new QCPAxisRect(plot_);
            grid->addElement(maps_ / columns, maps_ % columns, rect);
            rect->setMarginGroup(QCP::msLeft | QCP::msRight | QCP::msTop | QCP::msBottom, margins_);
            rect->axis(QCPAxis::atLeft)->setRangeReversed(true);  // row 0 at the top, like the matrix
            rect->axis(QCPAxis::atBottom)->setLabel(recipe_label(d.meta, b->recipe));
            for (auto type : {QCPAxis::atLeft, QCPAxis::atBottom}) set_tile_ticks(rect->axis(type));
            auto* map = new QCPColorMap(rect->axis(QCPAxis::atBottom), rect->axis(QCPAxis::atLeft));
            map->setInterpolate(false);
            // QCustomPlot sizes cells from the distance between cell centres, so a grid
            // one tile wide (a small model's operand) is stored as two half-width cells.
            const int cols = std::max(2, b->grid_cols), rows = std::max(2, b->grid_rows);
            auto extent = [](int n) { return n > 1 ? QCPRange(0, n - 1) : QCPRange(-0.25, 0.25); };
            map->data()->setSize(cols, rows);
            map->data()->setRange(extent(b->grid_cols), extent(b->grid_rows));
            for (int r = 0; r < rows; ++r)
                for (int c = 0; c < cols; ++c) {
                    const int sr = std::min(r, b->grid_rows - 1), sc = std::min(c, b->grid_cols - 1);
                    double v = src[static_cast<std::size_t>(sr) * b->grid_cols + sc];
                    if (quantity != SqnrDb) v = v > 0 ? std::log10(v) : qQNaN();
                    map->data()->setCell(c, r, v);
                    if (std::isfinite(v)) { lo = std::min(lo, v); hi = std::max(hi, v); }
                }
            map->setColorScale(scale);
            // Whole cells at the edges: the data range runs between the outer cells' centres.
            rect->axis(QCPAxis::atBottom)->setRange(-0.5, b->grid_cols - 0.5);
            rect->axis(QCPAxis::atLeft)->setRange(-0.5, b->grid_rows - 0.5);
            ++maps_;
        }
        plot_->plotLayout()->addElement(0, 1, scale);
        if (lo <= hi) scale->setDataRange(lo < hi ? QCPRange(lo, hi) : QCPRange(lo - 1, hi + 1));
    });
    heading_->setText(maps_ ? heading : tr("no block maps of the selected operand at or before this step"));
    plot_->replot();
}

}  // namespace fp8scope::views
