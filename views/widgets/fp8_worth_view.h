// FP8 worth view: which GEMMs are worth FP8. For each linear and GEMM of the selected run,
// the kernel time it saves against the run it is compared with (when the compared run
// itself is selected: the first other run) (the baseline of the
// lock-step comparison by default) against the error FP8 adds to it (models/fp8_worth.h):
// a scatter, SQNR (dB, right: less error) across and time saved up (up: faster), a point
// per GEMM labelled with its layer and linear and coloured by GEMM; and the same figures
// as a sortable table. GEMMs up and to the right are worth FP8; those low or left are not.
#pragma once

#include <QSortFilterProxyModel>

#include "models/fp8_worth.h"
#include "widgets/store_view.h"

class QCustomPlot;
class QLabel;
class QTableView;

namespace fp8scope::views {

class CompareRunCombo;

class Fp8WorthView : public StoreView {
    Q_OBJECT
public:
    explicit Fp8WorthView(const ViewContext& ctx, QWidget* parent = nullptr);
    const QAbstractItemModel* table() const override { return &model_; }
    const Fp8WorthModel& model() const { return model_; }
    QCustomPlot* plot() const { return plot_; }
    QTableView* tableView() const { return view_; }
    CompareRunCombo* compareRun() const { return compare_; }
    QString noteText() const;

protected:
    void redraw() override;

private:
    Fp8WorthModel model_;
    QSortFilterProxyModel sorted_;
    CompareRunCombo* compare_;
    QLabel* note_;
    QCustomPlot* plot_;
    QTableView* view_;
};

}  // namespace fp8scope::views
