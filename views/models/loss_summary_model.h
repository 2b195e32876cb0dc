// The loss summary: each run's final training and eval loss (the newest finite value) and
// both relative to the baseline run (with several seeds, the baseline run of the same seed),
// as `train --compare` prints at its end, but live.
#pragma once

#include <QAbstractTableModel>
#include <cmath>

#include "models/series_store.h"

namespace fp8scope::views {

// The baseline run, the one whose recipe quantizes nothing (trace::baseline_of), else run 0;
// -1 when there are no runs.
int baseline_run(const trace::TraceMeta& meta);
// 100 (x - base) / base; NaN when either is missing or base is 0.
double relative_pct(double x, double base);

class LossSummaryModel : public QAbstractTableModel {
    Q_OBJECT
public:
    enum Column { Run, LastStep, Loss, LossVsBaseline, EvalLoss, EvalVsBaseline, ColumnCount };

    explicit LossSummaryModel(const SeriesStore* store, QObject* parent = nullptr);
    void refresh();
    double value(int row, int column) const;  // NaN when not known

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role) const override;
    QVariant headerData(int section, Qt::Orientation o, int role) const override;

private:
    struct Row {
        QString run;
        double last_step = NAN, loss = NAN, eval_loss = NAN, loss_pct = NAN, eval_pct = NAN;
    };
    const SeriesStore* store_;
    std::vector<Row> rows_;
};

}  // namespace fp8scope::views
