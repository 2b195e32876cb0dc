// FP8 time saved against error added, per GEMM.
#include "models/fp8_worth.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <iterator>
#include <limits>
#include <string_view>
#include <tuple>

#include "engine/rank_health.h"
#include "models/display_names.h"
#include "models/gemm_error_model.h"
#include "models/kernel_detail.h"
#include "models/op_kernel_time.h"

namespace fp8scope::views {

namespace {

constexpr Gemm kGemms[] = {Gemm::Fprop, Gemm::Dgrad, Gemm::Wgrad};

int op_id(const trace::TraceMeta& meta, std::string_view name) {
    const auto it = std::find(meta.ops.begin(), meta.ops.end(), name);
    return it == meta.ops.end() ? -2 : static_cast<int>(it - meta.ops.begin());  // -2 matches no record
}

bool uses(Gemm g, Operand o) { return trace::operand_slot(0, g, o) >= 0; }

// Per (linear, GEMM): [0] the GEMM op's time, [1] the cast share, in µs.
std::vector<std::array<double, 2>> gemm_times(const trace::TraceMeta& meta, const OpTimes& t, int linears) {
    std::vector<std::array<double, 2>> out(static_cast<std::size_t>(linears) * 3, {0.0, 0.0});
    const int quantize = op_id(meta, "quantize");
    const int gemm_ops[] = {op_id(meta, gemm_name(kGemms[0])), op_id(meta, gemm_name(kGemms[1])), op_id(meta, gemm_name(kGemms[2]))};
    for (const auto& [k, ns] : t) {
        if (k.linear < 0 || k.linear >= linears) continue;
        for (int g = 0; g < 3; ++g) {
            auto& cell = out[static_cast<std::size_t>(k.linear) * 3 + g];
            if (k.op == gemm_ops[g]) cell[0] += ns * 1e-3;
            else if (k.op == quantize && k.operand >= 0 && k.operand < 3 && uses(kGemms[g], static_cast<Operand>(k.operand)))
                cell[1] += 0.5 * ns * 1e-3;
        }
    }
    return out;
}

// The lower in-use SQNR of the GEMM's operands at the newest capture <= step.
std::pair<double, std::int64_t> operand_sqnr(const RunData& rd, int linear, Gemm g, std::int64_t step) {
    double worst = std::numeric_limits<double>::quiet_NaN();
    std::int64_t at = -1;
    for (Operand o : {Operand::X, Operand::W, Operand::DY}) {
        if (!uses(g, o)) continue;
        const OperandSummary* s = rd.operand_at(step, {linear, g, o});
        if (!s || s->absent() || s->recipe_in_use < 0 || s->recipe_in_use >= static_cast<int>(s->errors().size())) continue;
        const double v = s->errors()[static_cast<std::size_t>(s->recipe_in_use)][&ErrorStats::sqnr_db];
        if (std::isnan(worst) || v < worst) worst = v;
        at = s->step;
    }
    return {worst, at};
}

}  // namespace

Fp8Worth fp8_worth(const TraceData& d, int baseline, int fp8, std::int64_t step) {
    Fp8Worth w;
    const int runs = static_cast<int>(d.runs.size());
    if (baseline < 0 || fp8 < 0 || baseline >= runs || fp8 >= runs) return w;
    const RunData &rb = d.runs[static_cast<std::size_t>(baseline)], &rf = d.runs[static_cast<std::size_t>(fp8)];
    const auto sb = timed_steps(rb), sf = timed_steps(rf);
    std::set_intersection(sb.begin(), sb.end(), sf.begin(), sf.end(), std::back_inserter(w.steps));
    const int linears = static_cast<int>(d.meta.linears.size());
    const std::size_t cells = static_cast<std::size_t>(linears) * 3;
    std::vector<std::vector<double>> base(cells), fp(cells), cast(cells), saved(cells);
    const bool device_b = has_device_records(rb), device_f = has_device_records(rf);
    for (std::int64_t s : w.steps) {
        const auto tb = gemm_times(d.meta, op_kernel_time(d, baseline, s, device_b), linears);
        const auto tf = gemm_times(d.meta, op_kernel_time(d, fp8, s, device_f), linears);
        for (std::size_t c = 0; c < cells; ++c) {
            const double b = tb[c][0] + tb[c][1], f = tf[c][0] + tf[c][1];
            base[c].push_back(b);
            fp[c].push_back(f);
            cast[c].push_back(tf[c][1]);
            saved[c].push_back(b - f);
        }
    }
    for (int l = 0; l < linears; ++l)
        for (int g = 0; g < 3; ++g) {
            const std::size_t c = static_cast<std::size_t>(l) * 3 + g;
            Fp8WorthRow r;
            r.linear = l;
            r.gemm = kGemms[g];
            r.label = short_operand_label(d.meta, {l, kGemms[g], Operand::X}).chopped(2);  // "L0 qkv fprop"
            r.base_us = median_ms(base[c]);
            r.fp8_us = median_ms(fp[c]);
            r.cast_us = median_ms(cast[c]);
            r.saved_us = median_ms(saved[c]);
            if (const trace::GemmErrorRecord* e = gemm_error_at(rf, step, l, kGemms[g]); e && !std::isnan(e->sqnr_db)) {
                r.sqnr_db = e->sqnr_db;
                r.output_error = true;
                r.error_step = e->step;
            } else {
                std::tie(r.sqnr_db, r.error_step) = operand_sqnr(rf, l, kGemms[g], step);
            }
            w.rows.push_back(r);
        }
    return w;
}

Fp8WorthModel::Fp8WorthModel(const SeriesStore* store, QObject* parent) : QAbstractTableModel(parent), store_(store) {}

void Fp8WorthModel::refresh(int baseline, int fp8, std::int64_t step) {
    beginResetModel();
    store_->read([&](const TraceData& d) {
        worth_ = fp8_worth(d, baseline, fp8, step);
        base_name_ = run_label(d.meta, baseline);
        fp8_name_ = run_label(d.meta, fp8);
    });
    endResetModel();
}

int Fp8WorthModel::rowCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : static_cast<int>(worth_.rows.size());
}
int Fp8WorthModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : kColumns; }

QVariant Fp8WorthModel::data(const QModelIndex& index, int role) const {
    if (!index.isValid() || index.row() >= rowCount()) return {};
    const Fp8WorthRow& r = worth_.rows[static_cast<std::size_t>(index.row())];
    const double v[] = {0, r.base_us, r.fp8_us, r.cast_us, r.saved_us, r.saved_pct(), r.sqnr_db, 0};
    const int c = index.column();
    if (role == Qt::UserRole) {
        if (c == Gemm_) return r.linear * 3 + static_cast<int>(r.gemm);
        if (c == ErrorOf) return r.output_error;
        return std::isnan(v[c]) ? -1e300 : v[c];
    }
    if (role == Qt::TextAlignmentRole && c != Gemm_ && c != ErrorOf) return int(Qt::AlignRight | Qt::AlignVCenter);
    if (role == Qt::ToolTipRole && c == Sqnr && r.error_step >= 0)
        return tr("capture step %1").arg(r.error_step);
    if (role != Qt::DisplayRole) return {};
    if (c == Gemm_) return r.label;
    if (c == ErrorOf) return r.error_step < 0 ? QString() : r.output_error ? tr("GEMM output") : tr("worse operand");
    if (std::isnan(v[c]) || (c == SavedPct && !(r.base_us > 0))) return QStringLiteral("—");
    if (c == SavedPct) return QString::number(v[c], 'f', 1);
    if (c == Sqnr) return std::isinf(v[c]) ? QStringLiteral("∞") : QString::number(v[c], 'f', 2);
    return QString::number(v[c], 'f', 1);
}

QVariant Fp8WorthModel::headerData(int section, Qt::Orientation o, int role) const {
    if (o != Qt::Horizontal || role != Qt::DisplayRole) return {};
    switch (section) {
        case Gemm_: return tr("GEMM");
        case Baseline: return tr("%1 µs").arg(base_name_);
        case Fp8: return tr("%1 µs").arg(fp8_name_);
        case Casts: return tr("of which casts µs");
        case Saved: return tr("saved µs");
        case SavedPct: return tr("saved %");
        case Sqnr: return tr("SQNR dB");
        case ErrorOf: return tr("error of");
        default: return {};
    }
}

}  // namespace fp8scope::views
