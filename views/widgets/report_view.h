// An `analyze` report on screen: the tensor list on top; for the selected tensor its
// statistics, the quantizer table (the worst SQNR in bold) and its log2 |x| histogram.
// Reports hold no block maps (analyze writes none), so there is no block map panel.
#pragma once

#include <QWidget>

class QCustomPlot;
class QLabel;
class QTableView;

namespace fp8scope::views {

class ReportModel;

class ReportView : public QWidget {
    Q_OBJECT
public:
    explicit ReportView(ReportModel* model, QWidget* parent = nullptr);
    QTableView* tensorTable() const { return tensors_; }

private:
    void showTensor(int index);

    ReportModel* model_;
    QTableView* tensors_;
    QTableView* stats_;
    QTableView* quantizers_;
    QLabel* title_;
    QCustomPlot* histogram_;
};

}  // namespace fp8scope::views
