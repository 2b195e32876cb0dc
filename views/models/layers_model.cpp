// Layers table model. A refresh with the same row count only reports changed data, so
// the view keeps its sorting, filter and selection while a run streams.
#include "models/layers_model.h"

#include <QColor>
#include <algorithm>

#include "models/display_names.h"
#include "models/goodness.h"
#include "models/model_roles.h"
#include "models/quantizer_facts.h"
#include "models/run_comparison.h"

namespace fp8scope::views {

bool LayersModel::isBad(int column, double v) {
    if (!std::isfinite(v)) return false;
    switch (column) {
        case SqnrDb: return v < kLowSqnrDb;
        case OverflowPct: return v > kHighOverflowPct;
        case UnderflowPct: return v > kHighUnderflowPct;
        default: return false;
    }
}

QString LayersModel::precisionLabel(const trace::GemmPrecision& p) {
    const QString recipe = QString::fromStdString(p.recipe);
    return p.a.empty() && p.b.empty() ? tr("high precision (%1)").arg(recipe) : recipe;
}

namespace {

// Before an overview's newest steps.
bool decimated_step(const TraceData& d, std::int64_t step) { return d.detail_from != INT64_MIN && step < d.detail_from; }

bool has_scaling_row(const ScalingColumns& sc, std::int64_t step) {
    return std::binary_search(sc.step.begin(), sc.step.end(), static_cast<double>(step));
}

// A slot's decimated point at `step`, if the decimation kept that step.
const trace::SlotPoint* decimated_point(const ScalingColumns& sc, int slot, std::int64_t step) {
    if (slot < 0 || slot >= static_cast<int>(sc.decimated.size())) return nullptr;
    const auto& v = sc.decimated[static_cast<std::size_t>(slot)];
    const auto it = std::lower_bound(v.begin(), v.end(), step, [](const trace::SlotPoint& p, std::int64_t s) { return p.step < s; });
    return it != v.end() && it->step == step ? &*it : nullptr;
}

}  // namespace

bool scaling_wanted(const TraceData& d, int run, std::int64_t step) {
    if (run < 0 || run >= static_cast<int>(d.runs.size()) || !decimated_step(d, step) || d.scaling_at == step) return false;
    return d.slot_count() > 0 && !has_scaling_row(d.runs[static_cast<std::size_t>(run)].scaling, step);
}

QString scaling_note(const TraceData& d, int run, std::int64_t step) {
    if (run < 0 || run >= static_cast<int>(d.runs.size()) || !decimated_step(d, step) || d.slot_count() == 0) return {};
    const ScalingColumns& sc = d.runs[static_cast<std::size_t>(run)].scaling;
    if (has_scaling_row(sc, step)) return {};
    if (d.scaling_at != step)
        return LayersModel::tr("step %1: reading its amax and scale from the trace (a large trace holds them decimated "
                               "before step %2)...")
            .arg(step)
            .arg(d.detail_from);
    return LayersModel::tr("step %1: the trace has no amax and scale of this step").arg(step);
}

LayersModel::LayersModel(const SeriesStore* store, QObject* parent)
    : QAbstractTableModel(parent), store_(store) {}

std::vector<LayersModel::Row> LayersModel::build_rows(const TraceData& d, int run, std::int64_t step, int what_if,
                                                      const std::vector<int>& what_ifs) {
    std::vector<Row> out;
    if (run < 0 || run >= static_cast<int>(d.runs.size())) return out;
    const RunData& rd = d.runs[run];
    const auto cap = rd.capture_index_at(step);
    const auto& sc = rd.scaling;
    auto srow = std::upper_bound(sc.step.begin(), sc.step.end(), static_cast<double>(step)) - sc.step.begin() - 1;
    // A large trace's decimated steps: only the step's own figures (a row read whole, or a
    // point the decimation kept), never an earlier step's or a capture's.
    const bool decimated = decimated_step(d, step);
    if (decimated && srow >= 0 && sc.step[static_cast<std::size_t>(srow)] != static_cast<double>(step)) srow = -1;
    const std::vector<trace::GemmPrecision> plan = trace::run_precision(d.meta, run);
    for (const OperandRef& ref : all_operands(static_cast<int>(d.meta.linears.size()))) {
        const std::size_t i = out.size();
        if (i < what_ifs.size() && what_ifs[i] >= 0) what_if = what_ifs[i];
        Row r;
        r.ref = ref;
        r.gemms = {ref.gemm};
        r.layer = d.meta.linears[ref.linear].layer;
        r.linear = linear_label(d.meta, ref.linear);
        if (!plan.empty()) {
            const trace::GemmPrecision& p = plan[std::size_t(ref.linear) * 3 + std::size_t(ref.gemm)];
            r.precision = precisionLabel(p);
            r.overridden = p.overridden != 0;
        }
        if (srow >= 0 && ref.slot() < sc.slot_count) {
            r.amax = sc.amax_at(srow, ref.slot());
            r.scale = sc.scale_at(srow, ref.slot());
        } else if (const trace::SlotPoint* p = decimated ? decimated_point(sc, ref.slot(), step) : nullptr) {
            r.amax = p->amax;
            r.scale = p->scale;
        }
        if (const OperandSummary* o = rd.operand(cap, ref)) {
            r.capture_step = o->step;
            r.in_use = o->recipe_in_use;
            r.recipe = quantizer_label(d.meta, o->recipe_in_use);
            if (srow < 0 && !decimated) {
                r.amax = o->figures[&TensorStats::amax];
                r.scale = o->figures[&trace::OperandRecord::scale];
            }
            r.kurtosis = o->figures[&OutlierSummary::kurtosis];
            r.dynamic_range = o->figures[&TensorStats::dynamic_range];
            const int shown = o->recipe_in_use >= 0 ? o->recipe_in_use : what_if;
            // A delayed what-if has no history here: no figures (quantizer_facts.h).
            const bool applies = o->recipe_in_use >= 0 || shown < 0 ||
                                 what_if_applies(quantizer_label(d.meta, shown).toStdString(), false);
            if (o->recipe_in_use < 0 && shown >= 0) {
                r.recipe = tr("what-if: %1").arg(quantizer_label(d.meta, shown)) + (applies ? QString() : tr(" (n/a)"));
                r.what_if = true;
            }
            for (const ErrorFigures& e : o->errors()) r.errors.insert(r.errors.end(), e.values().begin(), e.values().end());
            if (applies && shown >= 0 && shown < static_cast<int>(o->errors().size())) {
                const ErrorFigures& e = o->errors()[shown];
                r.sqnr_db = e[&ErrorStats::sqnr_db];
                r.underflow_pct = e[&ErrorStats::underflow_pct];
                r.overflow_pct = e[&ErrorStats::overflow_pct];
            }
        }
        out.push_back(std::move(r));
    }
    return out;
}

void LayersModel::refresh(int run, std::int64_t step, int what_if, int other) {
    if (other == run) other = -1;
    QString other_name;
    std::vector<Row> rows = store_->read([&](const TraceData& d) {
        std::vector<Row> out = build_rows(d, run, step, what_if);
        if (other >= 0 && other < static_cast<int>(d.runs.size())) {
            other_name = run_label(d.meta, other);
            // Both runs at one step: amax and scale at the newest step both recorded, the
            // rest at the newest capture step of both. Every list follows all_operands():
            // row i of one is row i of the others.
            const RunData &a = d.runs[run], &b = d.runs[other];
            delta_steps_ = {newest_common_step(a.scaling.step, b.scaling.step, step),
                            newest_common_step(a.capture_steps, b.capture_steps, step)};
            const std::vector<Row> ours_s = build_rows(d, run, delta_steps_.first, what_if),
                                   theirs_s = build_rows(d, other, delta_steps_.first, what_if),
                                   ours_plain = build_rows(d, run, delta_steps_.second, what_if),
                                   theirs_plain = build_rows(d, other, delta_steps_.second, what_if);
            // Like for like: an unquantized side's error figures are its what-if under the
            // quantizer the other side trains the operand with (a baseline against an FP8
            // run: how that tensor would fare under the same cast).
            auto in_use = [](const std::vector<Row>& rows) {
                std::vector<int> q;
                for (const Row& r : rows) q.push_back(r.in_use);
                return q;
            };
            const std::vector<Row> ours_c = build_rows(d, run, delta_steps_.second, what_if, in_use(theirs_plain)),
                                   theirs_c = build_rows(d, other, delta_steps_.second, what_if, in_use(ours_plain));
            for (std::size_t i = 0; i < out.size() && i < theirs_c.size(); ++i) {
                Row& r = out[i];
                r.shape_note = shapes_differ_note(d, run, other, r.ref, step);
                if (!r.shape_note.isEmpty()) continue;
                for (int c = 0; c < kDeltaColumns; ++c) {
                    const bool per_step = kDeltaOf[c] == Amax || kDeltaOf[c] == Scale;
                    r.delta[c] = per_step ? value(ours_s[i], kDeltaOf[c]) - value(theirs_s[i], kDeltaOf[c])
                                          : value(ours_c[i], kDeltaOf[c]) - value(theirs_c[i], kDeltaOf[c]);
                }
            }
        }
        return merge_shared_tensors(std::move(out));
    });
    const bool compared = !other_name.isEmpty();
    other_name_ = other_name;
    if (rows.size() == rows_.size() && compared == compared_) {
        rows_ = std::move(rows);
        if (!rows_.empty()) emit dataChanged(index(0, 0), index(rowCount() - 1, columnCount() - 1));
        if (compared) emit headerDataChanged(Qt::Horizontal, ColumnCount, ComparedColumnCount - 1);
    } else {
        beginResetModel();
        rows_ = std::move(rows);
        compared_ = compared;
        endResetModel();
    }
}

std::vector<LayersModel::Row> LayersModel::merge_shared_tensors(std::vector<Row> rows) {
    // Equal up to summation order: the two GEMMs' captures walk the tensor in different
    // orders (w and its transpose), so kurtosis or SQNR can differ in the last bits.
    auto same = [](double a, double b) {
        return a == b || (std::isnan(a) && std::isnan(b)) || std::abs(a - b) <= kSameFigureRel * std::max(std::abs(a), std::abs(b));
    };
    std::vector<Row> out;
    for (Row& r : rows) {
        auto it = std::find_if(out.begin(), out.end(), [&](const Row& o) {
            return o.ref.linear == r.ref.linear && o.ref.operand == r.ref.operand && o.recipe == r.recipe &&
                   o.precision == r.precision &&
                   o.capture_step == r.capture_step && same(o.amax, r.amax) && same(o.scale, r.scale) &&
                   same(o.kurtosis, r.kurtosis) && same(o.dynamic_range, r.dynamic_range) && same(o.sqnr_db, r.sqnr_db) &&
                   same(o.underflow_pct, r.underflow_pct) && same(o.overflow_pct, r.overflow_pct) &&
                   std::equal(o.errors.begin(), o.errors.end(), r.errors.begin(), r.errors.end(), same) &&
                   std::equal(o.delta.begin(), o.delta.end(), r.delta.begin(), same) && o.shape_note == r.shape_note;
        });
        if (it == out.end()) out.push_back(std::move(r));
        else it->gemms.push_back(r.ref.gemm);
    }
    return out;
}

OperandRef LayersModel::operandAt(int row) const {
    return row >= 0 && row < rowCount() ? rows_[row].ref : OperandRef{};
}

int LayersModel::rowOf(const OperandRef& ref) const {
    for (int i = 0; i < rowCount(); ++i) {
        const Row& r = rows_[i];
        if (r.ref.linear == ref.linear && r.ref.operand == ref.operand &&
            std::find(r.gemms.begin(), r.gemms.end(), ref.gemm) != r.gemms.end())
            return i;
    }
    return -1;
}

QString LayersModel::sharedWith(int row) const {
    const Row& r = rows_[row];
    QStringList gemms;
    for (const Row& o : rows_)
        if (&o != &r && o.ref.linear == r.ref.linear && o.ref.operand == r.ref.operand && o.recipe == r.recipe &&
            o.sqnr_db == r.sqnr_db && o.underflow_pct == r.underflow_pct)
            for (Gemm g : o.gemms) gemms << gemm_label(g);
    return gemms.join('+');
}

int LayersModel::rowCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : static_cast<int>(rows_.size());
}

int LayersModel::columnCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : compared_ ? ComparedColumnCount : ColumnCount;
}

double LayersModel::value(const Row& r, int column) {
    if (column >= ColumnCount && column < ComparedColumnCount) return r.delta[column - ColumnCount];
    switch (column) {
        case Layer: return r.layer;
        case Amax: return r.amax;
        case Scale: return r.scale;
        case Kurtosis: return r.kurtosis;
        case DynamicRange: return r.dynamic_range;
        case SqnrDb: return r.sqnr_db;
        case UnderflowPct: return r.underflow_pct;
        case OverflowPct: return r.overflow_pct;
        case CaptureStep: return r.capture_step < 0 ? NAN : static_cast<double>(r.capture_step);
        default: return NAN;
    }
}

QVariant LayersModel::data(const QModelIndex& index, int role) const {
    if (!checkIndex(index, CheckIndexOption::IndexIsValid)) return {};
    const Row& r = rows_[index.row()];
    const int c = index.column();
    const bool text_column = c == Linear || c == GemmCol || c == OperandCol || c == Precision || c == Recipe;
    if (role == Qt::ToolTipRole && c == Precision && !r.precision.isEmpty())
        return r.overridden ? tr("%1: an override of the run's recipe set this GEMM's recipe").arg(r.precision)
                            : tr("%1: the run's recipe").arg(r.precision);
    if (role == Qt::ToolTipRole && c >= ColumnCount && !r.shape_note.isEmpty()) return r.shape_note;
    if (role == Qt::ToolTipRole && c >= ColumnCount) {
        const Column of = kDeltaOf[c - ColumnCount];
        const std::int64_t at = of == Amax || of == Scale ? delta_steps_.first : delta_steps_.second;
        QString tip = tr("%1 of this run minus %2's, both at step %3 (the newest step both recorded)")
                          .arg(headerData(of, Qt::Horizontal, Qt::DisplayRole).toString(), other_name_)
                          .arg(at);
        if (of == SqnrDb || of == UnderflowPct || of == OverflowPct)
            tip += tr("; a run that does not quantize this operand shows its what-if under the other run's quantizer");
        return tip;
    }
    if (role == Qt::DisplayRole && c >= ColumnCount && !r.shape_note.isEmpty()) return tr("shapes differ");
    if (role == Qt::ToolTipRole && c == GemmCol)
        if (const QString other = sharedWith(index.row()); !other.isEmpty())
            return tr("%1 casts this tensor as %2 does, with the same figures under this quantizer; under some analysis "
                      "quantizer (blocks along rows or columns) they differ: compare them in the Quantization error view")
                .arg(data(index, Qt::DisplayRole).toString(), other);
    if (role == Qt::DisplayRole || role == Qt::ToolTipRole) {
        switch (c) {
            case Linear: return r.linear;
            case GemmCol: {
                QStringList g;
                for (Gemm x : r.gemms) g << gemm_label(x);
                return g.join('+');
            }
            case OperandCol: return operand_label(r.ref.operand);
            case Precision: return r.overridden ? r.precision + QStringLiteral(" \u25c2 override") : r.precision;
            case Recipe: return r.recipe;
            case Layer: return r.layer;
            case CaptureStep: return r.capture_step < 0 ? QVariant(QString()) : QVariant(r.capture_step);
            default: return format_figure(value(r, c));
        }
    }
    if (role == kValueRole) return text_column ? data(index, Qt::DisplayRole) : QVariant(value(r, c));
    if (role == Qt::TextAlignmentRole && !text_column) return int(Qt::AlignRight | Qt::AlignVCenter);
    if (role == Qt::BackgroundRole && !text_column && isBad(c, value(r, c))) return bad_cell_color();
    if (role == Qt::BackgroundRole && c == Precision && r.overridden) return QColor(255, 236, 179);  // amber: overridden
    if (role == Qt::ForegroundRole && c >= ColumnCount && !r.shape_note.isEmpty()) return QColor(Qt::darkGray);
    if (role == Qt::ForegroundRole && r.what_if && (c == Recipe || c == SqnrDb || c == UnderflowPct || c == OverflowPct))
        return QColor(Qt::darkGray);  // figures of a quantizer the run does not use
    return {};
}

QVariant LayersModel::headerData(int section, Qt::Orientation o, int role) const {
    if (o != Qt::Horizontal || role != Qt::DisplayRole) return {};
    static const char* names[ColumnCount] = {"layer", "linear", "gemm", "operand", "precision", "quantizer", "amax",
                                             "scale", "kurtosis", "dyn. range", "sqnr dB", "underflow %",
                                             "overflow %", "capture step"};
    if (section >= ColumnCount && section < ComparedColumnCount)
        return QStringLiteral("\u0394 %1").arg(QString::fromLatin1(names[kDeltaOf[section - ColumnCount]]));
    return section >= 0 && section < ColumnCount ? QString::fromLatin1(names[section]) : QVariant();
}

}  // namespace fp8scope::views
