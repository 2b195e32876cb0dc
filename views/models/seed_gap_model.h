// The seeds' verdict for the Loss view: for a comparison trained with several seeds per
// recipe (train --seeds N), every recipe's paired gap to the baseline over the seeds
// (trace::seed_gaps): its band (mean and 95% interval at every point of the judged loss
// series) for the plot, and a row per recipe with the gap at the end, whether it is
// significant and the first step it left the seeds' noise band for good.
#pragma once

#include <QAbstractTableModel>
#include <optional>

#include "models/series_store.h"
#include "run_seeds.h"

namespace fp8scope::views {

// Every run's step, loss and eval loss, as the seeds' statistics read them.
std::vector<stats::RunLosses> run_losses(const TraceData& d);

class SeedGapModel : public QAbstractTableModel {
    Q_OBJECT
public:
    enum Column { Recipe, MeanGap, GapPct, CiLow, CiHigh, Significant, LeavesBand, ColumnCount };

    explicit SeedGapModel(const SeriesStore* store, QObject* parent = nullptr);
    void refresh();
    // None unless the trace has several seeds per recipe and a baseline.
    const std::optional<trace::SeedGaps>& gaps() const { return gaps_; }
    // The recipe of a row: its place in the comparison (the baseline has no row).
    int recipe(int row) const { return row >= 0 && row < int(rows_.size()) ? rows_[std::size_t(row)] : -1; }
    double value(int row, int column) const;  // NaN when not known; Significant: 1 or 0

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role) const override;
    QVariant headerData(int section, Qt::Orientation o, int role) const override;

private:
    const SeriesStore* store_;
    std::optional<trace::SeedGaps> gaps_;
    std::vector<int> rows_;  // recipes but the baseline
};

}  // namespace fp8scope::views
