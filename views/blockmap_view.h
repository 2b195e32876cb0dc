// Block heatmaps: one tensor (the selected operand at the newest block-map step at or
// before the cursor) under every recipe with block maps (per-tensor, 1x128, 128x128,
// MXFP8), side by side with one shared colour scale, showing per-tile |x| absmax, the
// scale_inv in use, or the per-tile SQNR.
#pragma once

#include "store_view.h"

class QCustomPlot;
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

protected:
    void redraw() override;

private:
    QComboBox* quantity_;
    QLabel* heading_;
    QCustomPlot* plot_;
    int maps_ = 0;
};

}  // namespace fp8scope::views
