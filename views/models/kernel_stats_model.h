// The per-kernel table: ops/kernels of one step of one run grouped by name, with calls,
// total and mean time and their share of the step (step time when recorded, else the
// span of the step's ops).
#pragma once

#include <QAbstractTableModel>

#include "models/series_store.h"

namespace fp8scope::views {

class KernelStatsModel : public QAbstractTableModel {
    Q_OBJECT
public:
    enum Column { Name, Calls, TotalMs, MeanUs, SharePct, ColumnCount };

    explicit KernelStatsModel(const SeriesStore* store, QObject* parent = nullptr);
    void refresh(int run, std::int64_t step);
    double stepSeconds() const { return step_s_; }

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role) const override;
    QVariant headerData(int section, Qt::Orientation o, int role) const override;

private:
    struct Row {
        QString name;
        qint64 calls = 0;
        double total_ns = 0;
    };
    double value(const Row& r, int column) const;

    const SeriesStore* store_;
    std::vector<Row> rows_;
    double step_s_ = 0;
};

}  // namespace fp8scope::views
