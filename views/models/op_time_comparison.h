// Two runs' kernel time by op at one step, side by side: what the lock-step recipes cost
// per op and GEMM ("what did FP8 save, per GEMM"). Rows: the total, then each op (with its
// linear and, for a quantize op, its operand) either run's kernels ran in, by time saved
// (A - B) descending. Columns: op, time A, time B, saved (A - B) and saved as % of A.
#pragma once

#include <QAbstractTableModel>
#include <QStringList>
#include <cstdint>
#include <vector>

#include "models/series_store.h"

namespace fp8scope::views {

struct OpTimeRow {
    QString op;                // "total", "blocks.0.attn.qkv fprop", "blocks.0.attn.qkv quantize x"
    double a_us = 0, b_us = 0;  // 0 where a run has no kernel in the op
    double saved_us() const { return a_us - b_us; }
    double saved_pct() const { return a_us > 0 ? 100.0 * saved_us() / a_us : 0.0; }
};

// The rows of runs `a` and `b` at `step`; empty when either run is out of range.
std::vector<OpTimeRow> op_time_comparison(const TraceData& d, int a, int b, std::int64_t step);

class OpTimeComparisonModel : public QAbstractTableModel {
    Q_OBJECT
public:
    enum Column { Op, TimeA, TimeB, Saved, SavedPct, kColumns };
    explicit OpTimeComparisonModel(const SeriesStore* store, QObject* parent = nullptr);
    void refresh(int a, int b, std::int64_t step);
    const std::vector<OpTimeRow>& rows() const { return rows_; }

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role) const override;  // Qt::UserRole: the number, for sorting
    QVariant headerData(int section, Qt::Orientation o, int role) const override;

private:
    const SeriesStore* store_;
    std::vector<OpTimeRow> rows_;
    QString name_a_, name_b_;
};

}  // namespace fp8scope::views
