// The error of each GEMM's output per linear layer (rows) and GEMM (columns: fprop, dgrad,
// wgrad) at the newest capture step at or before the cursor: the error view's heatmap
// when its statistic is an output one. The GEMM of the recipe's cast operands against the
// same GEMM of the unquantized ones (trace::GemmErrorRecord); a GEMM without a quantized
// operand has none (SQNR +inf, relative error 0).
#pragma once

#include <QAbstractTableModel>
#include <QStringList>

#include "models/series_store.h"

namespace fp8scope::views {

enum class OutputStat { Sqnr, RelError };
constexpr int kOutputStatCount = 2;
const char* output_stat_name(OutputStat s);  // "output SQNR", "output rel. error"
double output_stat_value(const trace::GemmErrorRecord& r, OutputStat s);

// The newest record of (linear, gemm) at or before `step` (a step recorded again: its
// later record); nullptr when none.
const trace::GemmErrorRecord* gemm_error_at(const RunData& run, std::int64_t step, int linear, Gemm gemm);

class GemmErrorModel : public QAbstractTableModel {
    Q_OBJECT
public:
    explicit GemmErrorModel(const SeriesStore* store, QObject* parent = nullptr);
    void refresh(int run, std::int64_t step, OutputStat stat);

    double value(int row, int gemm) const;  // NaN when not captured
    std::int64_t step(int row, int gemm) const;  // the capture step of the value; -1 when none
    QString linearName(int row) const { return linears_.value(row); }
    OutputStat stat() const { return stat_; }

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;  // linear + one per GEMM
    QVariant data(const QModelIndex& index, int role) const override;
    QVariant headerData(int section, Qt::Orientation o, int role) const override;

private:
    QStringList linears_;
    std::vector<double> values_;       // (linears, 3)
    std::vector<std::int64_t> steps_;  // (linears, 3)
    OutputStat stat_ = OutputStat::Sqnr;
    const SeriesStore* store_;
};

}  // namespace fp8scope::views
