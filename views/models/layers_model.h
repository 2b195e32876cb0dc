// The layers table: every linear x GEMM x operand of the selected run with its latest
// figures at the step cursor (amax and scale of that step, statistics of the newest
// capture step at or before it). One row per operand slot.
#pragma once

#include <QAbstractTableModel>
#include <cmath>

#include "models/series_store.h"

namespace fp8scope::views {

class LayersModel : public QAbstractTableModel {
    Q_OBJECT
public:
    enum Column { Layer, Linear, GemmCol, OperandCol, Recipe, Amax, Scale, Kurtosis, DynamicRange,
                  SqnrDb, UnderflowPct, OverflowPct, CaptureStep, ColumnCount };

    explicit LayersModel(const SeriesStore* store, QObject* parent = nullptr);

    // Re-reads the store for `run` at `step`.
    void refresh(int run, std::int64_t step);
    OperandRef operandAt(int row) const;
    int rowOf(const OperandRef& ref) const;

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role) const override;
    QVariant headerData(int section, Qt::Orientation o, int role) const override;

private:
    struct Row {
        OperandRef ref;
        int layer = 0;
        QString linear, recipe;
        double amax = NAN, scale = NAN, kurtosis = NAN, dynamic_range = NAN;
        double sqnr_db = NAN, underflow_pct = NAN, overflow_pct = NAN;
        qint64 capture_step = -1;
    };
    double value(const Row& r, int column) const;

    const SeriesStore* store_;
    std::vector<Row> rows_;
};

}  // namespace fp8scope::views
