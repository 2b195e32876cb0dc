// The layers table: every linear x GEMM x operand of the selected run with its latest
// figures at the step cursor (amax and scale of that step, statistics of the newest
// capture step at or before it; of a large trace's decimated steps, amax and scale only
// where the store holds that step's, blank while they are read). One row per operand slot, except that a tensor two
// GEMMs share (fprop and dgrad read the same w) is one row when all its figures are the
// same in both, what-if ones included: per-tensor quantizers quantize it once, but 1x128
// and MX blocks follow the GEMM's orientation, so under them dgrad's dy and wgrad's dy
// (its transpose) can fare very differently, and both rows stay. An operand that trains
// unquantized (a baseline run) shows the what-if figures of a chosen analysis quantizer
// instead of blanks (none for a delayed quantizer: without history they describe no cast).
// Bad values are coloured (thresholds below). The precision column names the training
// recipe the row's GEMM followed ("high precision" where it quantizes neither operand),
// marked where an override of the run's recipe set it (the run's precision plan, recorded
// in the trace; blank in traces from before it was).
//
// With another run to compare with, delta columns follow: each key figure of this run
// minus the other run's for the same operand at one step: amax and scale at the newest
// step both runs recorded, the rest at the newest capture step of both (a float32 baseline
// records amax only at capture steps; another trace may capture on another cadence). Error
// figures compare like for like: a run that does not quantize the operand shows its what-if
// under the quantizer the other run trains it with. An operand whose element counts differ
// in the two runs (one linear name in two models) has none: "shapes differ".
#pragma once

#include <QAbstractTableModel>
#include <array>
#include <cmath>

#include "models/series_store.h"

namespace fp8scope::views {

// A large trace opened as an overview holds the amax and scale of its steps before the
// newest only decimated: whether those of `run` at `step` must be read whole for the
// cursor (TraceBatch::scaling_at), and what the Layers view says meanwhile (empty: the
// figures shown are the step's).
bool scaling_wanted(const TraceData& d, int run, std::int64_t step);
QString scaling_note(const TraceData& d, int run, std::int64_t step);

class LayersModel : public QAbstractTableModel {
    Q_OBJECT
public:
    enum Column { Layer, Linear, GemmCol, OperandCol, Precision, Recipe, Amax, Scale, Kurtosis, DynamicRange,
                  SqnrDb, UnderflowPct, OverflowPct, CaptureStep, ColumnCount,
                  // Shown only while another run is compared: this run's figure minus the other's.
                  DeltaAmax = ColumnCount, DeltaScale, DeltaKurtosis, DeltaSqnrDb, DeltaUnderflowPct, DeltaOverflowPct,
                  ComparedColumnCount };
    static constexpr int kDeltaColumns = ComparedColumnCount - ColumnCount;
    // The column each delta column is the difference of.
    static constexpr Column kDeltaOf[kDeltaColumns] = {Amax, Scale, Kurtosis, SqnrDb, UnderflowPct, OverflowPct};

    // What counts as bad: an SQNR under kLowSqnrDb (about 3 bits of mantissa lost against
    // E4M3's ~31 dB on Gaussian data), any saturation, underflow past kHighUnderflowPct.
    static constexpr double kLowSqnrDb = 20.0;
    static constexpr double kHighOverflowPct = 0.0;
    static constexpr double kHighUnderflowPct = 1.0;
    static bool isBad(int column, double value);
    // The precision column's text for one GEMM of a run's plan.
    static QString precisionLabel(const trace::GemmPrecision& p);
    // Two GEMMs' rows of one tensor are merged when their figures agree to this much.
    static constexpr double kSameFigureRel = 1e-6;

    explicit LayersModel(const SeriesStore* store, QObject* parent = nullptr);

    // Re-reads the store for `run` at `step`. Unquantized operands take the error figures
    // of analysis quantizer `what_if` (-1: none, blank). With `other` >= 0 (not `run`),
    // the delta columns hold `run`'s figures minus `other`'s.
    void refresh(int run, std::int64_t step, int what_if = -1, int other = -1);
    bool compared() const { return compared_; }
    OperandRef operandAt(int row) const;
    // The row showing `ref`, its own or the one it was merged into; -1 when none.
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
        QString precision;       // the GEMM's training recipe, as shown
        bool overridden = false;  // set by an override of the run's recipe
        double amax = NAN, scale = NAN, kurtosis = NAN, dynamic_range = NAN;
        double sqnr_db = NAN, underflow_pct = NAN, overflow_pct = NAN;
        qint64 capture_step = -1;
        int in_use = -1;  // the analysis quantizer the operand trains with; -1 none
        bool what_if = false;  // the error figures are another quantizer's
        std::vector<double> errors;  // every error figure under every analysis quantizer
        std::vector<Gemm> gemms;  // this row's GEMM, then those of the rows merged into it
        std::array<double, kDeltaColumns> delta{NAN, NAN, NAN, NAN, NAN, NAN};
        QString shape_note;  // why there are no deltas: the compared operands differ in shape
    };
    // Rows of every operand of `run`; an unquantized operand shows the error figures of
    // what_ifs[row] where that is >= 0, else of `what_if`.
    static std::vector<Row> build_rows(const TraceData& d, int run, std::int64_t step, int what_if,
                                       const std::vector<int>& what_ifs = {});
    // Merges each row into an earlier one of the same tensor with the same figures.
    static std::vector<Row> merge_shared_tensors(std::vector<Row> rows);
    static double value(const Row& r, int column);
    // The GEMMs of the other rows of `row`'s tensor that show the same figures (kept
    // apart by a what-if); empty when none.
    QString sharedWith(int row) const;

    const SeriesStore* store_;
    std::vector<Row> rows_;
    bool compared_ = false;
    QString other_name_;
    std::pair<std::int64_t, std::int64_t> delta_steps_{-1, -1};  // the deltas' scaling and capture step
};

}  // namespace fp8scope::views
