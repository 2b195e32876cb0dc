// The Health view's table: one row per rank of a data-parallel job with its median
// compute and all-reduce wait (comm) per step, its slowest step, and a flag on the ranks
// whose median compute is more than 10% above the median of all ranks (core's
// slow_ranks(), the rule the engine's in-flight check uses). Comparing with the median
// of ranks means a uniformly slow job flags nothing and one slow GPU, link or host does.
// Two columns show what the gradient sums cost: the median bytes a rank put into them per
// step and the last measured error that compressed (BF16 or FP8) sums added against
// float32 sums. The trace's meta says which type the sums travelled in (traces from
// before it was recorded do not); FP8 sums are also measured against BF16 sums of the same
// sample (SNR, underflow, overflow). A line of its own says when delayed scaling's state
// differed across ranks (scaling_mismatch events), and another when an elastic job lost a
// rank and went on without it, or took a rank in at a step boundary (world_changed events).
#pragma once

#include <QAbstractTableModel>
#include <QStringList>
#include <vector>

#include "models/series_store.h"

namespace fp8scope::views {

class RankHealthModel : public QAbstractTableModel {
    Q_OBJECT
public:
    enum Column { Rank, MedianCompute, MedianComm, SlowestStep, GradMB, SumError, Flag, ColumnCount };
    static constexpr double kSlowMargin = 0.1;  // more than 10% slower than the median rank

    explicit RankHealthModel(const SeriesStore* store, QObject* parent = nullptr);
    void refresh();

    bool dataParallel() const { return world_size_ > 1; }
    bool flagged(int rank) const;
    const std::vector<int>& slowRanks() const { return slow_; }  // slowest first
    double medianOfRanks() const { return median_of_ranks_; }    // of the ranks' median compute
    // One line that answers "is any rank slow, and which?"; for a single process, that it
    // has no health records. Of a large trace opened as an overview, which steps it judged.
    QString verdict() const;
    // One line on the gradient sums: their type, megabytes per rank per step, what BF16 or
    // FP8 saves against float32 and the last error it added. A trace that does not say
    // the type gets a line that names none ("in BF16 or FP8" when an error was measured).
    // Empty when no rank recorded the bytes (traces from before the field).
    QString gradientSums() const;
    // When the ranks' delayed-scaling state differed: how many findings, the first's step
    // and detail; empty when it never did.
    QString scalingState() const;
    // When an elastic job lost ranks and went on, or ranks joined (world_changed events): one line per
    // change with its step and detail; empty when the world never changed.
    QString worldChanges() const;

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role) const override;
    QVariant headerData(int section, Qt::Orientation o, int role) const override;

private:
    struct Row {
        double compute = 0, comm = 0;  // medians over steps; NaN before the first record
        qint64 slowest_step = -1;      // by the whole step's time
        double slowest_ms = 0;
        double ratio = 0;              // median compute / the median of ranks
        double grad_mb = 0;            // median over steps; NaN when not recorded
        double error = 0;              // the last measured sum error, at error_step (-1: never)
        qint64 error_step = -1;
        // FP8 sums against BF16 ones, at fp8_step (-1: never measured)
        double snr_db = 0, underflow_pct = 0, overflow_pct = 0;
        qint64 fp8_step = -1;
    };
    const SeriesStore* store_;
    std::vector<Row> rows_;
    std::vector<int> slow_;
    double median_of_ranks_ = 0;
    int world_size_ = 1;
    QString sum_type_;          // "FP8 E4M3", ...; empty when the trace does not say
    std::size_t sum_bytes_ = 0;  // bytes per gradient in that type
    int mismatches_ = 0;         // scaling_mismatch events
    qint64 first_mismatch_step_ = 0;
    QString first_mismatch_;
    QStringList world_changes_;  // "step 12: lost rank 2; world 4 -> 3; ..."
    QString covered_;  // of an overview: the steps of the ranks' records ("28001-30000"); empty otherwise
    QString judgement() const;  // the verdict without the steps it covers
};

}  // namespace fp8scope::views
