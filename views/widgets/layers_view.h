// Layers table view: every layer x GEMM x operand with its latest figures, sortable and
// filterable; choosing a row selects that operand in every other view, choosing several
// rows (Ctrl/Shift-click) selects them all, the row with the focus being the current.
// For a baseline run the error columns show a what-if quantizer chosen beside the filter.
// With a run chosen to compare with (the baseline by default), delta columns follow: the
// selected run's key figures minus that run's. At a cursor step before a large trace's
// newest steps, that step's amax and scale are read from the trace (scalingWanted) and a
// line says so while they are.
#pragma once

#include "models/layers_model.h"
#include "widgets/store_view.h"

class QComboBox;
class QLabel;
class QLineEdit;
class QSortFilterProxyModel;
class QTableView;

namespace fp8scope::views {

class CompareRunCombo;

class LayersView : public StoreView {
    Q_OBJECT
public:
    explicit LayersView(const ViewContext& ctx, QWidget* parent = nullptr);
    const QAbstractItemModel* table() const override { return &model_; }
    const LayersModel& model() const { return model_; }
    QTableView* tableView() const { return view_; }
    QSortFilterProxyModel* proxy() const { return proxy_; }
    QLineEdit* filter() const { return filter_; }
    // The analysis quantizer whose figures an unquantized (baseline) operand shows.
    QComboBox* whatIf() const { return what_if_; }
    CompareRunCombo* compareRun() const { return compare_; }
    // What the view says of the amax and scale at the cursor ("" when they are the step's).
    QString scalingNote() const;

protected:
    void redraw() override;

private:
    void showSelection();
    void takeSelection();
    std::vector<OperandRef> selectedOperands() const;  // rows selected in the table, slot order
    LayersModel model_;
    QSortFilterProxyModel* proxy_;
    QTableView* view_;
    QLineEdit* filter_;
    QComboBox* what_if_;
    CompareRunCombo* compare_;
    QLabel* note_;
    std::pair<std::uint64_t, std::int64_t> asked_{0, 0};  // store generation and step of the last scalingWanted
    int sized_run_ = -1;    // the run the column widths were fitted to
    int sized_other_ = -1;  // and the compared run
    bool syncing_ = false;  // the table and the Selection are being made to agree
};

}  // namespace fp8scope::views
