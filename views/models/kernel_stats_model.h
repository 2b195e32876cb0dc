// The per-kernel table: ops/kernels grouped by name, over the cursor step or over every
// step of the run, with calls, total time, the distribution of a call's time (mean,
// median, p95, max) and the share of the time (step time when recorded, else the span of
// the steps' ops). When the scope holds device records (kernel timing) the rows are the
// device records alone, per kernel name, with the share of the scope's device time (the
// sum of its kernels' times) and the host op and kind of the kernel.
#pragma once

#include <QAbstractTableModel>
#include <QColor>

#include "models/kernel_kind.h"
#include "models/series_store.h"

namespace fp8scope::views {

class KernelStatsModel : public QAbstractTableModel {
    Q_OBJECT
public:
    enum Column { Name, Calls, TotalMs, MeanUs, MedianUs, P95Us, MaxUs, SharePct, ParentOp, Kind, ColumnCount };
    enum Scope { CursorStep, WholeRun };

    explicit KernelStatsModel(const SeriesStore* store, QObject* parent = nullptr);
    void refresh(int run, std::int64_t step, Scope scope = CursorStep, KernelSelection filter = {});
    // True when the rows are device records (the shares are of device time).
    bool device() const { return device_; }
    // The time the shares are of: the step's, or the sum over the run's steps.
    double stepSeconds() const { return step_s_; }
    int steps() const { return steps_; }  // steps with ops in the scope
    double value(int row, int column) const;

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role) const override;
    QVariant headerData(int section, Qt::Orientation o, int role) const override;

private:
    struct Row {
        QString name, parent, kind;
        QColor color;  // of the kind, as in the timeline
        qint64 calls = 0;
        double total_ns = 0, median_ns = NAN, p95_ns = NAN, max_ns = NAN;
    };

    const SeriesStore* store_;
    std::vector<Row> rows_;
    double step_s_ = 0;
    int steps_ = 0;
    bool device_ = false;
};

// The q-quantile (0..1) of `v` by the nearest-rank method; reorders v; NaN when empty.
double nearest_rank(std::vector<double>& v, double q);

}  // namespace fp8scope::views
