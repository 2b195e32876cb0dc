// Block heatmaps: one tensor (the current operand at the newest block-map step at or
// before the cursor, which the heading names when it is not the cursor's) under every
// quantizer with block maps (per-tensor, 1x128, 128x128, MXFP8, NVFP4 1x16 and 16x16,
// MXFP4 1x32), side by side at one size and over one value range, showing the per-tile
// scale_inv in use (the largest block scale_inv in the tile) or the per-tile SQNR, with a
// perceptual colour scale per element format (E4M3, MXFP8 E4M3 included; E5M2; E2M1; SQNR
// on the goodness scale of every view: red worse, blue better), or either minus the
// per-tensor map (the goodness scale, white at zero: a finer scale_inv or a higher SQNR is
// better; FP4 has no per-tensor twin and is left out); the per-tile |x| absmax, the same
// under every quantizer, as one map. A tensor that is one tile at the block size is
// described in text.
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
    // The differences are each block quantizer's map minus the per-tensor (current scaling)
    // map of the same element format: where blockwise scaling gains or loses.
    enum Quantity { Absmax, ScaleInv, SqnrDb, ScaleInvDiff, SqnrDiff };
    explicit BlockMapView(const ViewContext& ctx, QWidget* parent = nullptr);
    QCustomPlot* plot() const { return plot_; }
    int mapCount() const { return maps_; }
    // True when the tensor is one tile at the block size: the view shows text, no maps.
    bool oneTile() const { return one_tile_; }
    QString heading() const;
    void setQuantity(Quantity q);
    // "absmax", "scale_inv", "sqnr", "scale_inv_diff", "sqnr_diff": names for the command
    // line; -1 when unknown.
    static int quantityByName(const QString& name);

protected:
    void redraw() override;
    void resizeEvent(QResizeEvent* e) override;  // the maps' grid follows the plot's shape

private:
    int columnsFor(QSize plot, double* tile_px = nullptr) const;
    void squareTiles();
    QComboBox* quantity_;
    QLabel* heading_;
    QCustomPlot* plot_;
    QCPMarginGroup* margins_;
    int maps_ = 0;
    bool one_tile_ = false;
    struct { int maps = 0, grid_rows = 0, grid_cols = 0; } shape_;  // of the drawn maps
};

}  // namespace fp8scope::views
