// The per-kernel table: ops/kernels grouped by name, over the cursor step or over every
// step of the run, with calls, total time, the distribution of a call's time (mean,
// median, p95, max) and the share of the time (step time when recorded, else the span of
// the steps' ops). When the scope holds device records (kernel timing) the rows are the
// run's device records alone (kernel_attribution.h: records with no op and evaluation
// put back by time), grouped by kernel name and the op it ran in (evaluation's calls apart), by
// the op they ran in or by step category (kernel_breakdown.h), with the share of the
// scope's device time (the sum of its records' times), the host op and kind, and for
// GEMMs of a linear the shape, the operand types (gemm_dtypes.h) and achieved TFLOP/s
// (gemm_shape.h). Steps whose individual records were not kept (kernel_detail.h) count
// from their kernel sums: calls, total and max; the median and p95 are of the recorded
// calls, and GEMM TFLOP/s of the recorded GEMMs. The cursor step of a large trace opened
// as an overview counts from the sums its decimation kept, or read for the cursor
// (RunData::step_sums); the whole run from the steps read whole.
#pragma once

#include <QAbstractTableModel>
#include <QColor>

#include "models/kernel_attribution.h"
#include "models/kernel_breakdown.h"
#include "models/kernel_kind.h"
#include "models/series_store.h"

namespace fp8scope::views {

class KernelStatsModel : public QAbstractTableModel {
    Q_OBJECT
public:
    // Name: the kernel's short name (kernel_kind.h); FullName: as the trace has it, so that
    // the CSV export keeps both.
    enum Column { Name, Calls, TotalMs, MeanUs, MedianUs, P95Us, MaxUs, SharePct, ParentOp, Kind, Shape, Dtypes, Tflops, FullName, ColumnCount };
    enum Scope { CursorStep, WholeRun };
    enum Grouping { ByKernel, ByOp, ByCategory };

    explicit KernelStatsModel(const SeriesStore* store, QObject* parent = nullptr);
    void refresh(int run, std::int64_t step, Scope scope = CursorStep, KernelSelection filter = {},
                 Grouping grouping = ByKernel);
    // True when the rows are device records (the shares are of device time).
    bool device() const { return device_; }
    // The time the shares are of: the step's, or the sum over the run's steps.
    double stepSeconds() const { return step_s_; }
    int steps() const { return steps_; }  // steps with ops or kernel sums in the scope
    // Of those, the steps counted from their kernel sums (their records were not kept):
    // their calls add to calls, total and max, not to the median and p95.
    int summedSteps() const { return summed_steps_; }
    double value(int row, int column) const;
    // Whether a device record falls in a row's group (the timeline highlights the row's
    // records); host records and rows out of range never do.
    bool matches(int row, const trace::TraceMeta& meta, const StepKernel& k) const;

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role) const override;
    QVariant headerData(int section, Qt::Orientation o, int role) const override;

private:
    struct Key {
        int op = -1;         // ByKernel: the kernel name id; ByOp: the parent op id
        int parent = -1;     // ByKernel: the op it ran in (a kernel of two ops is two rows)
        bool eval = false;   // ByKernel and ByOp: evaluation's records apart
        int category = -1;   // ByCategory
        auto operator<=>(const Key&) const = default;
    };
    struct Row {
        Key key;
        QString name, full_name, parent, kind, shape, shapes;  // shapes: every one, for the tooltip
        QString dtypes, dtypes_why;  // the same for the GEMM's types, each with its rule
        QColor color;  // of the kind, as in the timeline
        qint64 calls = 0;
        double total_ns = 0, median_ns = NAN, p95_ns = NAN, max_ns = NAN;
        double flops = 0, flop_ns = 0;  // over the calls with a known GEMM shape
    };
    Key key_of(const trace::TraceMeta& meta, const StepKernel& k) const;
    // `r` with the calls, total and distribution of the call times `t` (reordered).
    static Row with_times(Row r, std::vector<double>& t);
    static void by_total(std::vector<Row>& rows);  // the largest total first

    const SeriesStore* store_;
    std::vector<Row> rows_;
    Grouping grouping_ = ByKernel;
    double step_s_ = 0;
    int steps_ = 0, summed_steps_ = 0;
    bool device_ = false;
};

// The q-quantile (0..1) of `v` by the nearest-rank method; reorders v; NaN when empty.
double nearest_rank(std::vector<double>& v, double q);

}  // namespace fp8scope::views
