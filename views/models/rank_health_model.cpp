// Rank health table model.
#include "models/rank_health_model.h"

#include "models/kernel_detail.h"

#include <QBrush>
#include <QColor>
#include <algorithm>
#include <cmath>

#include "backend.h"
#include "engine/rank_health.h"
#include "models/model_roles.h"

namespace fp8scope::views {

namespace {
double median_of(const std::vector<float>& v) {
    const std::vector<double> ms(v.begin(), v.end());
    return median_ms(ms);
}

// The median of the entries that are numbers; NaN when none is.
double finite_median(const std::vector<float>& v) {
    std::vector<double> finite;
    for (float x : v)
        if (std::isfinite(x)) finite.push_back(x);
    return median_ms(finite);
}

// One decimal from 1 MB up; below, two significant digits, so a small model's sums do
// not read as 0.0.
QString format_mb(double mb) {
    if (!(mb > 0) || mb >= 1) return QString::number(mb, 'f', 1);
    return QString::number(mb, 'f', std::min(6, 1 - static_cast<int>(std::floor(std::log10(mb)))));
}
QString format_error(double e) { return QString::number(e, 'e', 2); }
QString not_recorded() { return QStringLiteral("\u2014"); }
QString format_db(double db) {
    return std::isnan(db) ? not_recorded() : std::isinf(db) ? QStringLiteral("inf") : QString::number(db, 'f', 1);
}
// Two significant digits below 1%, so a rare underflow does not read as 0.
QString format_pct(double p) {
    if (std::isnan(p)) return not_recorded();
    if (p == 0 || p >= 1) return QString::number(p, 'f', p == 0 ? 0 : 1);
    return QString::number(p, 'g', 2);
}

// The type a trace's grad_dtype names, as the view writes it; DType::E8M0 (never a sum
// type) when it names none.
DType sum_dtype(const std::string& name) {
    for (DType t : {DType::F32, DType::BF16, DType::E4M3, DType::E5M2})
        if (name == dtype_name(t)) return t;
    return DType::E8M0;
}
QString sum_type_label(DType t) {
    switch (t) {
        case DType::F32: return QStringLiteral("float32");
        case DType::BF16: return QStringLiteral("BF16");
        case DType::E4M3: return QStringLiteral("FP8 E4M3");
        case DType::E5M2: return QStringLiteral("FP8 E5M2");
        default: return {};
    }
}
}  // namespace

RankHealthModel::RankHealthModel(const SeriesStore* store, QObject* parent)
    : QAbstractTableModel(parent), store_(store) {}

void RankHealthModel::refresh() {
    std::vector<Row> rows;
    int world = 1;
    DType type = DType::E8M0;
    int mismatches = 0;
    qint64 first_step = 0;
    QString first;
    QStringList changes;
    QString covered;
    store_->read([&](const TraceData& d) {
        world = d.meta.world_size;
        // A large trace opened as an overview reads its ranks' records of the newest steps
        // (and of a zoom) whole: the figures below cover those, and the verdict says so.
        std::vector<std::int64_t> steps;  // every rank's steps read whole, once
        if (d.detail_from > INT64_MIN)
            for (const RankColumns& c : d.ranks)
                for (double s : c.step) steps.push_back(static_cast<std::int64_t>(s));
        std::sort(steps.begin(), steps.end());
        steps.erase(std::unique(steps.begin(), steps.end()), steps.end());
        if (!steps.empty()) covered = step_ranges(steps, 4);
        type = sum_dtype(d.meta.grad_dtype);
        for (const RankColumns& c : d.ranks) {
            Row r;
            r.compute = median_of(c[&trace::RankStepRecord::compute_ms]);
            r.comm = median_of(c[&trace::RankStepRecord::comm_ms]);
            const std::vector<float>& step_ms = c[&trace::RankStepRecord::step_ms];
            const auto slowest = std::max_element(step_ms.begin(), step_ms.end());
            if (slowest != step_ms.end()) {
                r.slowest_step = static_cast<qint64>(c.step[static_cast<std::size_t>(slowest - step_ms.begin())]);
                r.slowest_ms = *slowest;
            }
            r.grad_mb = finite_median(c[&trace::RankStepRecord::grad_bytes]) / 1e6;
            if (!c.grad_error.empty()) {
                r.error = c.grad_error.back();
                r.error_step = static_cast<qint64>(c.error_step.back());
            }
            // The overflow figure is a number at every step FP8 sums were measured.
            const std::vector<float>& overflow = c[&trace::RankStepRecord::grad_overflow_pct];
            for (std::size_t i = overflow.size(); i-- > 0;)
                if (!std::isnan(overflow[i])) {
                    r.fp8_step = static_cast<qint64>(c.step[i]);
                    r.snr_db = c[&trace::RankStepRecord::grad_snr_db][i];
                    r.underflow_pct = c[&trace::RankStepRecord::grad_underflow_pct][i];
                    r.overflow_pct = overflow[i];
                    break;
                }
            rows.push_back(r);
        }
        for (const trace::EventRecord& e : d.events) {
            if (e.kind == EventKind::ScalingMismatch && mismatches++ == 0) {
                first_step = e.step;
                first = QString::fromStdString(e.detail);
            }
            if (e.kind == EventKind::WorldChanged)
                changes << tr("step %1: %2").arg(e.step).arg(QString::fromStdString(e.detail));
        }
    });
    // Ranks without records yet take no part: slow_ranks() reports a rank whose time is
    // not a number, which is right for a lost rank, not for one still to report.
    std::vector<int> reporting;
    std::vector<double> compute;
    for (int k = 0; k < static_cast<int>(rows.size()); ++k)
        if (rows[k].slowest_step >= 0) {
            reporting.push_back(k);
            compute.push_back(rows[k].compute);
        }
    std::vector<int> slow;
    double median = median_ms(compute);
    for (const SlowRank& s : slow_ranks(compute, kSlowMargin)) slow.push_back(reporting[s.rank]);
    for (std::size_t i = 0; i < reporting.size(); ++i) rows[reporting[i]].ratio = compute[i] / median;

    beginResetModel();
    rows_ = std::move(rows);
    slow_ = std::move(slow);
    median_of_ranks_ = median;
    world_size_ = world;
    sum_type_ = sum_type_label(type);
    sum_bytes_ = sum_type_.isEmpty() ? 0 : dtype_size(type);
    mismatches_ = mismatches;
    first_mismatch_step_ = first_step;
    first_mismatch_ = first;
    world_changes_ = changes;
    covered_ = covered;
    endResetModel();
}

bool RankHealthModel::flagged(int rank) const { return std::find(slow_.begin(), slow_.end(), rank) != slow_.end(); }

QString RankHealthModel::verdict() const {
    if (!dataParallel()) return tr("single-process run: no data-parallel health records");
    if (covered_.isEmpty()) return judgement();
    return judgement() + tr(" (of steps %1 read whole: a large trace's newest and those a zoom shows; the figures below "
                            "are of these)")
                             .arg(covered_);
}

QString RankHealthModel::judgement() const {
    if (std::none_of(rows_.begin(), rows_.end(), [](const Row& r) { return r.slowest_step >= 0; }))
        return tr("%1 ranks: no step times yet").arg(world_size_);
    if (slow_.empty())
        return tr("all %1 ranks within %2% of the median rank's compute (%3 ms per step)")
            .arg(world_size_)
            .arg(kSlowMargin * 100, 0, 'f', 0)
            .arg(median_of_ranks_, 0, 'f', 1);
    QStringList which;
    for (int k : slow_)
        which << tr("rank %1 (%2 ms, +%3%)")
                     .arg(k)
                     .arg(rows_[k].compute, 0, 'f', 1)
                     .arg((rows_[k].ratio - 1) * 100, 0, 'f', 0);
    return tr("slow: %1 against the median rank's %2 ms compute per step")
        .arg(which.join(", "))
        .arg(median_of_ranks_, 0, 'f', 1);
}

QString RankHealthModel::gradientSums() const {
    std::vector<double> mb;
    const Row* last = nullptr;  // the latest measurement; of those at one step, the largest error
    for (const Row& r : rows_) {
        if (std::isfinite(r.grad_mb)) mb.push_back(r.grad_mb);
        if (r.error_step >= 0 && (!last || r.error_step > last->error_step ||
                                  (r.error_step == last->error_step && r.error > last->error)))
            last = &r;
    }
    if (mb.empty()) return {};
    const double per_rank = median_ms(mb);
    if (sum_type_.isEmpty()) {
        // Only compressed sums are measured; which of BF16 and FP8 they were, the trace
        // does not say, so the line names no saving.
        if (!last) return tr("gradient sums: %1 MB per rank per step in float32").arg(format_mb(per_rank));
        return tr("gradient sums: %1 MB per rank per step in BF16 or FP8; error added %2 (last measured at step %3)")
            .arg(format_mb(per_rank), format_error(last->error))
            .arg(last->error_step);
    }
    QString line = tr("Gradient sums in %1: %2 MB per rank per step").arg(sum_type_, format_mb(per_rank));
    if (sum_bytes_ >= 4) return line;
    // float32 takes 4 bytes a gradient. FP8 sums also carry a chunk header and padding (at
    // most 31 bytes per rank and bucket), which 4 x their bytes counts as gradients: far
    // below the line's precision for sums of any size.
    const double ratio = 4.0 / double(sum_bytes_);
    line += tr(", %1 of float32's (saves %2 MB)")
                .arg(ratio == 2 ? tr("half") : tr("a quarter"), format_mb(per_rank * (ratio - 1)));
    if (last) line += tr("; last measured sum error %1 at step %2").arg(format_error(last->error)).arg(last->error_step);
    // Every rank measures the same sums against the same shadow: any rank's latest will do.
    const Row* fp8 = nullptr;
    for (const Row& r : rows_)
        if (r.fp8_step >= 0 && (!fp8 || r.fp8_step > fp8->fp8_step)) fp8 = &r;
    if (fp8)
        line += tr("; against BF16 sums: SNR %1 dB, underflow %2%, overflow %3% (step %4)")
                    .arg(format_db(fp8->snr_db), format_pct(fp8->underflow_pct), format_pct(fp8->overflow_pct))
                    .arg(fp8->fp8_step);
    return line;
}

QString RankHealthModel::scalingState() const {
    if (mismatches_ == 0) return {};
    return tr("Delayed scaling state differs across ranks: %n finding(s), the first at step %1: %2", nullptr,
              mismatches_)
        .arg(first_mismatch_step_)
        .arg(first_mismatch_);
}

QString RankHealthModel::worldChanges() const {
    if (world_changes_.isEmpty()) return {};
    return tr("The job's world changed (elastic: ranks lost or joined):\n%1").arg(world_changes_.join("\n"));
}

int RankHealthModel::rowCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : static_cast<int>(rows_.size());
}
int RankHealthModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : ColumnCount; }

QVariant RankHealthModel::data(const QModelIndex& index, int role) const {
    if (!checkIndex(index, CheckIndexOption::IndexIsValid)) return {};
    const int rank = index.row();
    const Row& r = rows_[rank];
    const bool slow = flagged(rank);
    if (role == Qt::BackgroundRole && slow) return QBrush(QColor(255, 215, 215));
    if (role == Qt::ForegroundRole && slow && index.column() == Flag) return QBrush(QColor(180, 0, 0));
    if (role == kStepRole && r.slowest_step >= 0) return r.slowest_step;
    if (role == kValueRole) {
        switch (index.column()) {
            case Rank: return rank;
            case MedianCompute: return r.compute;
            case MedianComm: return r.comm;
            case SlowestStep: return r.slowest_step >= 0 ? QVariant(r.slowest_ms) : QVariant(NAN);
            case GradMB: return r.grad_mb;
            case SumError: return r.error_step >= 0 ? r.error : NAN;
            case Flag: return slow ? 1.0 : 0.0;
        }
    }
    if (role == Qt::ToolTipRole && index.column() == SumError)
        return r.error_step < 0 ? (sum_bytes_ >= 4 || sum_type_.isEmpty() ? tr("not measured (float32 sums add none)")
                                                                           : tr("not measured yet"))
                                : tr("relative L2 error the %1 sums added against float32 sums, measured at step %2")
                                          .arg(sum_type_.isEmpty() ? tr("BF16 or FP8") : sum_type_)
                                          .arg(r.error_step) +
                                      (r.fp8_step < 0 ? QString()
                                                      : tr("; against BF16 sums at step %1: SNR %2 dB, underflow %3%, "
                                                           "overflow %4%")
                                                            .arg(r.fp8_step)
                                                            .arg(format_db(r.snr_db), format_pct(r.underflow_pct),
                                                                 format_pct(r.overflow_pct)));
    if (role == Qt::DisplayRole || role == Qt::ToolTipRole) {
        switch (index.column()) {
            case Rank: return rank;
            case MedianCompute: return format_figure(r.compute);
            case MedianComm: return format_figure(r.comm);
            case SlowestStep:
                return r.slowest_step < 0 ? QString()
                                          : tr("%1 (%2 ms)").arg(r.slowest_step).arg(format_figure(r.slowest_ms));
            case GradMB: return std::isfinite(r.grad_mb) ? format_mb(r.grad_mb) : not_recorded();
            case SumError: return r.error_step >= 0 ? format_error(r.error) : not_recorded();
            case Flag: return slow ? tr("slow +%1%").arg((r.ratio - 1) * 100, 0, 'f', 0) : QString();
        }
    }
    return {};
}

QVariant RankHealthModel::headerData(int section, Qt::Orientation o, int role) const {
    if (o != Qt::Horizontal || role != Qt::DisplayRole) return {};
    // Medians over the steps; two lines keep the table narrow beside the plots.
    static const char* names[ColumnCount] = {"rank",           "median\ncompute ms", "median\ncomm ms",
                                             "slowest\nstep", "grad\nMB/step",      "sum\nerror",
                                             "flag"};
    return section >= 0 && section < ColumnCount ? QString::fromLatin1(names[section]) : QVariant();
}

}  // namespace fp8scope::views
