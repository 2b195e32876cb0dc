// Kernels view: the timeline of the cursor step's op/kernel records per stream, and the
// per-kernel table (calls, total, mean, share of step).
#pragma once

#include "models/kernel_stats_model.h"
#include "widgets/store_view.h"

class QTableView;

namespace fp8scope::views {

class TimelineWidget;

class KernelView : public StoreView {
    Q_OBJECT
public:
    explicit KernelView(const ViewContext& ctx, QWidget* parent = nullptr);
    const QAbstractItemModel* table() const override { return &model_; }
    const KernelStatsModel& model() const { return model_; }
    TimelineWidget* timeline() const { return timeline_; }

protected:
    void redraw() override;

private:
    KernelStatsModel model_;
    TimelineWidget* timeline_;
    QTableView* view_;
};

}  // namespace fp8scope::views
