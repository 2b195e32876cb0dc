// An `analyze` report as the GUI presents it, without widgets: the tensor list, and for
// the current tensor its statistics and one row per quantizer. A report is no training
// trace (no steps, no runs, no gemms), so it is shown as what it holds.
#pragma once

#include <QAbstractTableModel>
#include <QString>
#include <vector>

#include "analysis_report_reader.h"

namespace fp8scope::views {

// The quantizer with the lowest SQNR (NaN skipped); -1 when there is none.
int worst_quantizer(const std::vector<ErrorStats>& errors);
// "8 x 16 x 64"
QString shape_label(const std::vector<std::int64_t>& shape);

// One row per tensor. kValueRole gives the number behind a numeric cell.
class ReportTensorsModel : public QAbstractTableModel {
    Q_OBJECT
public:
    enum Column { Name, Shape, Dtype, Numel, Amax, Kurtosis, Worst, WorstSqnr, ColumnCount };
    explicit ReportTensorsModel(const AnalysisReport* report, QObject* parent = nullptr)
        : QAbstractTableModel(parent), report_(report) {}
    void reset() { beginResetModel(), endResetModel(); }
    int rowCount(const QModelIndex& = {}) const override;
    int columnCount(const QModelIndex& = {}) const override { return ColumnCount; }
    QVariant data(const QModelIndex& index, int role) const override;
    QVariant headerData(int section, Qt::Orientation o, int role) const override;

private:
    const AnalysisReport* report_;
};

// The current tensor's statistics: one row per figure (figure, value).
class ReportStatsModel : public QAbstractTableModel {
    Q_OBJECT
public:
    explicit ReportStatsModel(QObject* parent = nullptr) : QAbstractTableModel(parent) {}
    void setTensor(const TensorAnalysis* t);
    int rowCount(const QModelIndex& = {}) const override { return static_cast<int>(rows_.size()); }
    int columnCount(const QModelIndex& = {}) const override { return 2; }
    QVariant data(const QModelIndex& index, int role) const override;
    QVariant headerData(int section, Qt::Orientation o, int role) const override;

private:
    struct Row {
        QString figure;
        double value;
    };
    std::vector<Row> rows_;
};

// The current tensor under every quantizer of the report, one row each.
class ReportQuantizersModel : public QAbstractTableModel {
    Q_OBJECT
public:
    enum Column { Quantizer, Sqnr, RelL2, MaxAbsErr, Cosine, Underflow, Overflow, NonfiniteOut, ScaleInvMin,
                  ScaleInvMax, ColumnCount };
    explicit ReportQuantizersModel(QObject* parent = nullptr) : QAbstractTableModel(parent) {}
    void setTensor(const TensorAnalysis* t);
    int rowCount(const QModelIndex& = {}) const override;
    int columnCount(const QModelIndex& = {}) const override { return ColumnCount; }
    QVariant data(const QModelIndex& index, int role) const override;
    QVariant headerData(int section, Qt::Orientation o, int role) const override;

private:
    const TensorAnalysis* tensor_ = nullptr;
    int worst_ = -1;
};

// The open report and its models; setTensor() picks the tensor the panels show.
class ReportModel : public QObject {
    Q_OBJECT
public:
    explicit ReportModel(QObject* parent = nullptr);
    // Reads `path`; false (and *error) on a damaged, foreign or newer file, the report
    // shown before stays.
    bool open(const QString& path, QString* error);
    void clear();
    bool isOpen() const { return open_; }
    const AnalysisReport& report() const { return report_; }
    int tensor() const { return tensor_; }
    void setTensor(int index);
    // The current tensor's log2 |x| histogram as (exponent, count), nonzero bins only.
    std::vector<std::pair<int, std::int64_t>> histogram() const;

    ReportTensorsModel* tensors() { return &tensors_; }
    ReportStatsModel* stats() { return &stats_; }
    ReportQuantizersModel* quantizers() { return &quantizers_; }

signals:
    void tensorChanged(int index);

private:
    AnalysisReport report_;
    bool open_ = false;
    int tensor_ = -1;
    ReportTensorsModel tensors_;
    ReportStatsModel stats_;
    ReportQuantizersModel quantizers_;
};

}  // namespace fp8scope::views
