// Report tables.
#include "models/report_model.h"

#include <QFont>
#include <cmath>
#include <stdexcept>

#include "models/model_roles.h"

namespace fp8scope::views {

int worst_quantizer(const std::vector<ErrorStats>& errors) {
    int worst = -1;
    for (int i = 0; i < static_cast<int>(errors.size()); ++i)
        if (!std::isnan(errors[i].sqnr_db) && (worst < 0 || errors[i].sqnr_db < errors[worst].sqnr_db)) worst = i;
    return worst;
}

QString shape_label(const std::vector<std::int64_t>& shape) {
    QStringList dims;
    for (std::int64_t d : shape) dims << QString::number(d);
    return dims.join(QStringLiteral(" x "));
}

namespace {

// A cell: text for display, the number for kValueRole, numbers right-aligned.
QVariant number_cell(double v, int role, const QString& text) {
    if (role == Qt::DisplayRole) return text;
    if (role == kValueRole) return v;
    if (role == Qt::TextAlignmentRole) return QVariant::fromValue(Qt::AlignRight | Qt::AlignVCenter);
    return {};
}
QVariant number_cell(double v, int role) { return number_cell(v, role, format_figure(v)); }

}  // namespace

int ReportTensorsModel::rowCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : static_cast<int>(report_->tensors.size());
}

QVariant ReportTensorsModel::data(const QModelIndex& index, int role) const {
    if (!index.isValid() || index.row() >= rowCount()) return {};
    const TensorAnalysis& t = report_->tensors[index.row()];
    const TensorStats& s = t.analysis.tensor;
    const int worst = worst_quantizer(t.analysis.errors);
    const double worst_sqnr = worst < 0 ? NAN : t.analysis.errors[worst].sqnr_db;
    switch (index.column()) {
    case Name:
        if (role == Qt::ToolTipRole) return QString::fromStdString(t.file);
        return role == Qt::DisplayRole ? QString::fromStdString(t.name) : QVariant();
    case Shape: return role == Qt::DisplayRole ? shape_label(t.shape) : QVariant();
    case Dtype: return role == Qt::DisplayRole ? QString::fromStdString(t.dtype) : QVariant();
    case Numel: return number_cell(double(s.numel), role, QString::number(s.numel));
    case Amax: return number_cell(s.amax, role);
    case Kurtosis: return number_cell(s.outliers.kurtosis, role);
    case Worst:
        return role == Qt::DisplayRole && worst >= 0 ? QString::fromStdString(t.analysis.errors[worst].recipe) : QVariant();
    case WorstSqnr: return number_cell(worst_sqnr, role);
    }
    return {};
}

QVariant ReportTensorsModel::headerData(int section, Qt::Orientation o, int role) const {
    if (o != Qt::Horizontal || role != Qt::DisplayRole) return {};
    static const char* names[] = {"tensor", "shape", "dtype", "numel", "amax", "kurtosis", "worst quantizer",
                                  "worst SQNR dB"};
    return tr(names[section]);
}

void ReportStatsModel::setTensor(const TensorAnalysis* t) {
    beginResetModel();
    rows_.clear();
    if (t) {
        const TensorStats& s = t->analysis.tensor;
        rows_ = {{tr("numel"), double(s.numel)},
                 {tr("finite"), double(s.finite)},
                 {tr("NaN"), double(s.nan)},
                 {tr("Inf"), double(s.inf)},
                 {tr("zero"), double(s.zero)},
                 {tr("amax"), s.amax},
                 {tr("min nonzero |x|"), s.min_nonzero_abs},
                 {tr("mean"), s.mean},
                 {tr("rms"), s.rms},
                 {tr("stddev"), s.stddev},
                 {tr("dynamic range (log2)"), s.dynamic_range},
                 {tr("kurtosis"), s.outliers.kurtosis},
                 {tr("fraction beyond %1 rms").arg(s.outliers.k), s.outliers.frac_beyond_k_rms}};
    }
    endResetModel();
}

QVariant ReportStatsModel::data(const QModelIndex& index, int role) const {
    if (!index.isValid() || index.row() >= rowCount()) return {};
    const Row& r = rows_[index.row()];
    if (index.column() == 0) return role == Qt::DisplayRole ? r.figure : QVariant();
    // Counts are exact integers: all their digits, not 4 significant ones.
    const bool count = index.row() < 5;
    return number_cell(r.value, role, count ? QString::number(qint64(r.value)) : format_figure(r.value));
}

QVariant ReportStatsModel::headerData(int section, Qt::Orientation o, int role) const {
    if (o != Qt::Horizontal || role != Qt::DisplayRole) return {};
    return section == 0 ? tr("figure") : tr("value");
}

void ReportQuantizersModel::setTensor(const TensorAnalysis* t) {
    beginResetModel();
    tensor_ = t;
    worst_ = t ? worst_quantizer(t->analysis.errors) : -1;
    endResetModel();
}

int ReportQuantizersModel::rowCount(const QModelIndex& parent) const {
    return parent.isValid() || !tensor_ ? 0 : static_cast<int>(tensor_->analysis.errors.size());
}

QVariant ReportQuantizersModel::data(const QModelIndex& index, int role) const {
    if (!index.isValid() || index.row() >= rowCount()) return {};
    const ErrorStats& e = tensor_->analysis.errors[index.row()];
    if (role == Qt::FontRole && index.row() == worst_) {  // the worst quantizer stands out
        QFont bold;
        bold.setBold(true);
        return bold;
    }
    switch (index.column()) {
    case Quantizer: return role == Qt::DisplayRole ? QString::fromStdString(e.recipe) : QVariant();
    case Sqnr: return number_cell(e.sqnr_db, role);
    case RelL2: return number_cell(e.rel_l2, role);
    case MaxAbsErr: return number_cell(e.max_abs_err, role);
    case Cosine: return number_cell(e.cosine, role);
    case Underflow: return number_cell(e.underflow_pct, role);
    case Overflow: return number_cell(e.overflow_pct, role);
    case NonfiniteOut: return number_cell(double(e.nonfinite_out), role, QString::number(e.nonfinite_out));
    case ScaleInvMin: return number_cell(e.scale_inv_min, role);
    case ScaleInvMax: return number_cell(e.scale_inv_max, role);
    }
    return {};
}

QVariant ReportQuantizersModel::headerData(int section, Qt::Orientation o, int role) const {
    if (o != Qt::Horizontal || role != Qt::DisplayRole) return {};
    static const char* names[] = {"quantizer",   "SQNR dB",       "rel L2",        "max |err|",
                                  "cosine",      "underflow %",   "overflow (saturated) %", "non-finite out",
                                  "scale_inv min", "scale_inv max"};
    return tr(names[section]);
}

ReportModel::ReportModel(QObject* parent) : QObject(parent), tensors_(&report_) {}

bool ReportModel::open(const QString& path, QString* error) {
    AnalysisReport read;
    try {
        read = read_analysis_report(path.toStdString());
    } catch (const std::exception& e) {
        if (error) *error = QString::fromStdString(e.what());
        return false;
    }
    report_ = std::move(read);
    open_ = true;
    tensor_ = -1;
    tensors_.reset();
    setTensor(report_.tensors.empty() ? -1 : 0);
    return true;
}

void ReportModel::clear() {
    report_ = {};
    open_ = false;
    tensors_.reset();
    setTensor(-1);
}

void ReportModel::setTensor(int index) {
    if (index < -1 || index >= static_cast<int>(report_.tensors.size())) return;
    tensor_ = index;
    const TensorAnalysis* t = index < 0 ? nullptr : &report_.tensors[index];
    stats_.setTensor(t);
    quantizers_.setTensor(t);
    emit tensorChanged(index);
}

std::vector<std::pair<int, std::int64_t>> ReportModel::histogram() const {
    std::vector<std::pair<int, std::int64_t>> bins;
    if (tensor_ < 0) return bins;
    const Log2Histogram& h = report_.tensors[tensor_].analysis.tensor.histogram;
    for (int e = kHistMinExp; e <= kHistMaxExp; ++e)
        if (h.count(e) > 0) bins.emplace_back(e, h.count(e));
    return bins;
}

}  // namespace fp8scope::views
