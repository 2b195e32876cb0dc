// Which GEMMs are worth FP8: for each linear and GEMM (fprop, dgrad, wgrad), the device
// time the FP8 run saves against the baseline run of the same lock-step comparison, and
// the error FP8 adds to it.
//
// Time of a GEMM in a run: its op's kernels (the GEMM, its bias and scale preparation)
// plus a share of the casts of its linear: each operand's quantize kernels are charged half
// to each of the two GEMMs that use the operand (x: fprop, wgrad; w: fprop, dgrad; dy:
// dgrad, wgrad), so the three GEMMs' times sum to the linear's. Saved: the median over the
// steps where both runs kept their kernel records of (baseline time - FP8 time). A CPU
// run, with no kernel records, is timed by its host ops (op_kernel_time.h).
// Error: the GEMM output's SQNR in the FP8 run at the newest capture step at or before
// `step` where the trace has it; else the lower SQNR of the GEMM's two operands under the
// quantizer the FP8 run used (the operand that loses more).
#pragma once

#include <QAbstractTableModel>
#include <cstdint>
#include <limits>
#include <vector>

#include "models/series_store.h"

namespace fp8scope::views {

struct Fp8WorthRow {
    int linear = 0;
    Gemm gemm = Gemm::Fprop;
    QString label;                       // "L0 qkv fprop"
    double base_us = 0, fp8_us = 0;      // medians over the compared steps
    double cast_us = 0;                  // of fp8_us: the FP8 run's cast share
    double saved_us = 0;                 // median of (base - fp8) per step
    double saved_pct() const { return base_us > 0 ? 100.0 * saved_us / base_us : 0.0; }
    double sqnr_db = std::numeric_limits<double>::quiet_NaN();
    bool output_error = false;           // sqnr_db is the GEMM output's, else its worse operand's
    std::int64_t error_step = -1;        // the capture step of sqnr_db
};

struct Fp8Worth {
    std::vector<Fp8WorthRow> rows;       // linear, then GEMM order
    std::vector<std::int64_t> steps;     // the compared steps
};

Fp8Worth fp8_worth(const TraceData& d, int baseline, int fp8, std::int64_t step);

class Fp8WorthModel : public QAbstractTableModel {
    Q_OBJECT
public:
    enum Column { Gemm_, Baseline, Fp8, Casts, Saved, SavedPct, Sqnr, ErrorOf, kColumns };
    explicit Fp8WorthModel(const SeriesStore* store, QObject* parent = nullptr);
    void refresh(int baseline, int fp8, std::int64_t step);
    const Fp8Worth& worth() const { return worth_; }

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role) const override;  // Qt::UserRole: the number, for sorting
    QVariant headerData(int section, Qt::Orientation o, int role) const override;

private:
    const SeriesStore* store_;
    Fp8Worth worth_;
    QString base_name_, fp8_name_;
};

}  // namespace fp8scope::views
