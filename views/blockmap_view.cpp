// Block heatmaps. The plot's layout is rebuilt on each redraw: one axis rect per recipe
// in a row, then the colour scale they share. Values are log10 for |x| and scale_inv
// (they span decades), dB as they are for SQNR.
#include "blockmap_view.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QVBoxLayout>
#include <cmath>

#include "display_names.h"
#include "plot_style.h"

namespace fp8scope::views {

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
    layout->addWidget(plot_, 1);
    connect(quantity_, &QComboBox::currentIndexChanged, this, [this] { refresh(true); });
}

QString BlockMapView::heading() const { return heading_->text(); }

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
        QCPRange range(INFINITY, -INFINITY);
        for (const trace::BlockMapRecord* b : rd.blockmaps_of(at, sel)) {
            const auto& src = quantity == Absmax ? b->absmax : quantity == ScaleInv ? b->scale_inv : b->sqnr_db;
            const std::size_t cells = static_cast<std::size_t>(b->grid_rows) * b->grid_cols;
            if (b->grid_rows <= 0 || b->grid_cols <= 0 || src.size() < cells) continue;  // damaged record
            auto* rect = new QCPAxisRect(plot_);
            plot_->plotLayout()->addElement(0, maps_, rect);
            rect->axis(QCPAxis::atLeft)->setRangeReversed(true);  // row 0 at the top, like the matrix
            rect->axis(QCPAxis::atBottom)->setLabel(tr("%1\n%2x%3 tiles of %4x%5")
                                                        .arg(recipe_label(d.meta, b->recipe))
                                                        .arg(b->grid_rows).arg(b->grid_cols)
                                                        .arg(b->tile_rows).arg(b->tile_cols));
            auto* map = new QCPColorMap(rect->axis(QCPAxis::atBottom), rect->axis(QCPAxis::atLeft));
            map->setInterpolate(false);
            map->setGradient(quantity == SqnrDb ? QCPColorGradient::gpJet : QCPColorGradient::gpThermal);
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
                    if (std::isfinite(v)) range = QCPRange(std::min(range.lower, v), std::max(range.upper, v));
                }
            map->setColorScale(scale);
            map->rescaleAxes();
            ++maps_;
        }
        if (maps_ == 0) {
            delete scale;
            return;
        }
        plot_->plotLayout()->addElement(0, maps_, scale);
        if (range.lower <= range.upper) scale->setDataRange(range.lower < range.upper ? range : QCPRange(range.lower - 1, range.upper + 1));
    });
    heading_->setText(maps_ ? heading : tr("no block maps of the selected operand at or before this step"));
    plot_->replot();
}

}  // namespace fp8scope::views
