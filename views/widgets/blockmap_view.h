// Block heatmaps: one tensor (the current operand at the newest block-map step at or
// before the cursor) under every recipe with block maps (per-tensor, 1x128, 128x128,
// MXFP8), side by side with one shared colour scale, showing per-tile |x| absmax, the
// scale_inv in use, or the per-tile SQNR.
#pragma once

#include "widgets/store_view.h"

class QCustomPlot;
class QCPMarginGroup;
class QComboBox;
class QLabel;

namespace fp8scope::views {

class BlockMapView : public StoreView {
    Q_OBJECT
public:
    enum Quantity { Absmax, ScaleInv, SqnrDb };
    explicit BlockMapView(const ViewContext& ctx, QWidget* parent = nullptr);
    QCustomPlot* plot() const { return plot_; }
    int mapCount() const { return maps_; }
    QString heading() const;
    void setQuantity(Quantity q);
    // "absmax", "scale_inv", "sqnr": names for the command line; -1 when unknown.
    static int quantityByName(const QString& name);

protected:
    void redraw() override;
    void resizeEvent(QResizeEvent* e) override;  // the maps' grid follows the plot's shape

private:
    int columnsFor(QSize plot) const;
    QComboBox* quantity_;
    QLabel* heading_;
    QCustomPlot* plot_;
    QCPMarginGroup* margins_;
    int maps_ = 0;
    struct { int maps = 0, grid_rows = 0, grid_cols = 0; } shape_;  // of the drawn maps
    int columns_ = 1;
};

}  // namespace fp8scope::views
