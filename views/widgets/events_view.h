// Events view: rewinds, recipe switches, NaNs and the rest; activating a row moves the
// step cursor to the event's step.
#pragma once

#include "models/events_model.h"
#include "widgets/store_view.h"

class QTableView;

namespace fp8scope::views {

class EventsView : public StoreView {
    Q_OBJECT
public:
    explicit EventsView(const ViewContext& ctx, QWidget* parent = nullptr);
    const QAbstractItemModel* table() const override { return &model_; }
    QTableView* tableView() const { return view_; }
    void jumpTo(int row);

protected:
    void redraw() override;

private:
    EventsModel model_;
    QTableView* view_;
};

}  // namespace fp8scope::views
