// Layers table view: every layer x GEMM x operand with its latest figures, sortable and
// filterable; choosing a row selects that operand in every other view.
#pragma once

#include "layers_model.h"
#include "store_view.h"

class QLineEdit;
class QSortFilterProxyModel;
class QTableView;

namespace fp8scope::views {

class LayersView : public StoreView {
    Q_OBJECT
public:
    explicit LayersView(const ViewContext& ctx, QWidget* parent = nullptr);
    const QAbstractItemModel* table() const override { return &model_; }
    const LayersModel& model() const { return model_; }
    QTableView* tableView() const { return view_; }
    QSortFilterProxyModel* proxy() const { return proxy_; }
    QLineEdit* filter() const { return filter_; }

protected:
    void redraw() override;

private:
    void showSelection();
    LayersModel model_;
    QSortFilterProxyModel* proxy_;
    QTableView* view_;
    QLineEdit* filter_;
};

}  // namespace fp8scope::views
