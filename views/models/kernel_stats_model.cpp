// Per-kernel statistics of a step or a run.
#include "models/kernel_stats_model.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include "models/display_names.h"
#include "models/kernel_detail.h"
#include "models/gemm_dtypes.h"
#include "models/gemm_shape.h"
#include "models/model_roles.h"

namespace fp8scope::views {

double nearest_rank(std::vector<double>& v, double q) {
    if (v.empty()) return NAN;
    const auto rank = static_cast<std::size_t>(std::clamp(std::ceil(q * static_cast<double>(v.size())), 1.0,
                                                          static_cast<double>(v.size()))) - 1;
    std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(rank), v.end());
    return v[rank];
}

KernelStatsModel::KernelStatsModel(const SeriesStore* store, QObject* parent)
    : QAbstractTableModel(parent), store_(store) {}

namespace {

QString parent_label(const trace::TraceMeta& meta, int parent, bool eval) {
    if (eval) return QStringLiteral("eval");
    return parent >= 0 ? op_label(meta, parent) : QStringLiteral("(no op)");
}

}  // namespace

KernelStatsModel::Row KernelStatsModel::with_times(Row r, std::vector<double>& t) {
    r.calls += static_cast<qint64>(t.size());
    for (double x : t) r.total_ns += x;
    if (!t.empty()) r.max_ns = std::isnan(r.max_ns) ? *std::max_element(t.begin(), t.end())
                                                    : std::max(r.max_ns, *std::max_element(t.begin(), t.end()));
    r.median_ns = nearest_rank(t, 0.5);
    r.p95_ns = nearest_rank(t, 0.95);
    return r;
}

void KernelStatsModel::by_total(std::vector<Row>& rows) {
    std::sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) { return a.total_ns > b.total_ns; });
}

KernelStatsModel::Key KernelStatsModel::key_of(const trace::TraceMeta& meta, const StepKernel& k) const {
    switch (grouping_) {
        case ByKernel: return {k.rec.op, k.eval ? -1 : k.rec.parent, k.eval, -1};
        case ByOp: return {k.eval ? -1 : k.rec.parent, -1, k.eval, -1};
        case ByCategory: break;
    }
    return {-1, -1, false, static_cast<int>(step_category(meta, k))};
}

bool KernelStatsModel::matches(int row, const trace::TraceMeta& meta, const StepKernel& k) const {
    return device_ && row >= 0 && row < rowCount() && is_device(k.rec) && key_of(meta, k) == rows_[row].key;
}

void KernelStatsModel::refresh(int run, std::int64_t step, Scope scope, KernelSelection filter, Grouping grouping) {
    double step_s = 0;
    int steps = 0, summed_steps = 0;
    bool device = false;
    grouping_ = grouping;
    std::vector<Row> rows = store_->read([&](const TraceData& d) {
        std::vector<Row> out;
        if (run < 0 || run >= static_cast<int>(d.runs.size())) return out;
        const RunData& rd = d.runs[run];
        auto [lo, hi] = scope == WholeRun ? std::pair<std::size_t, std::size_t>{0, rd.ops.size()} : rd.ops_of_step(step);
        // The kernel sums of the scope's steps that kept no individual records: of the run,
        // those read whole; of the cursor step, also those of a step an overview kept.
        const std::span<const trace::KernelStepRecord> sums =
            scope == WholeRun ? std::span<const trace::KernelStepRecord>(rd.kernel_steps) : rd.step_sums(step);
        for (std::size_t i = lo; i < hi && !device; ++i) device = is_device(rd.ops[i]);
        device = device || !sums.empty();
        if (device) {
            // Device records, attributed per step; shares are of all device time in the
            // scope, whatever the filter shows.
            const std::int64_t tokens = step_tokens(d.meta);
            std::map<Key, std::vector<double>> durations;  // ns per call
            std::map<Key, Row> first;                      // labels, shapes and FLOPs per group; summed calls
            std::map<Key, std::vector<GemmShape>> shapes;
            std::map<Key, std::vector<GemmDtypes>> types;
            // By (recipe id, GEMM op id, linear): the rule needs the recipe and the shape.
            std::map<std::tuple<int, int, int>, GemmDtypes> rule;
            const auto& recipe_ids = rd.steps[&trace::StepRecord::recipe];
            // A custom recipe's GEMMs follow the built-in recipes its overrides name, per
            // linear and GEMM (/meta/precision, recorded for the recipe the run started with).
            const std::vector<trace::GemmPrecision> precision = trace::run_precision(d.meta, run);
            const std::string started = run >= 0 && run < static_cast<int>(d.meta.runs.size())
                                            ? d.meta.runs[static_cast<std::size_t>(run)].recipe
                                            : std::string();
            auto gemm_recipe = [&](const std::string& step_recipe, const std::string& op, int linear) {
                const int g = op == "fprop" ? 0 : op == "dgrad" ? 1 : op == "wgrad" ? 2 : -1;
                if (g < 0 || precision.empty() || step_recipe != started || linear < 0 ||
                    static_cast<std::size_t>(linear) * 3 + 2 >= precision.size())
                    return step_recipe;
                return precision[static_cast<std::size_t>(linear) * 3 + static_cast<std::size_t>(g)].recipe;
            };
            // The group's row, labelled by its first kernel.
            auto group = [&](const StepKernel& k) -> Row& {
                const Key key = key_of(d.meta, k);
                durations[key];
                auto [it, fresh] = first.try_emplace(key);
                Row& r = it->second;
                if (fresh) {
                    r.key = key;
                    if (grouping_ == ByKernel) {
                        r.full_name = op_label(d.meta, k.rec.op);
                        r.name = short_kernel_name(r.full_name);
                        r.parent = parent_label(d.meta, k.rec.parent, k.eval);
                        const KernelKind kind = kernel_kind(d.meta, k.rec);
                        r.kind = kernel_kind_name(kind);
                        r.color = kernel_kind_color(kind);
                    } else if (grouping_ == ByOp) {
                        r.name = r.full_name = parent_label(d.meta, k.rec.parent, k.eval);
                    } else {
                        const auto c = static_cast<StepCategory>(key.category);
                        r.name = r.full_name = r.kind = step_category_name(c);
                        r.color = step_category_color(c);
                    }
                }
                return r;
            };
            std::vector<std::int64_t> recorded;  // steps whose records were read, ascending
            for (std::size_t i = lo; i < hi;) {
                const std::int64_t s = rd.ops.step(i);
                while (i < hi && rd.ops.step(i) == s) ++i;
                recorded.push_back(s);
                ++steps;
                const std::ptrdiff_t srow = rd.step_row_at(s);
                const int recipe = srow >= 0 ? static_cast<int>(recipe_ids[static_cast<std::size_t>(srow)]) : -1;
                for (const StepKernel& k : step_kernels(d, run, s)) {
                    const double ns = static_cast<double>(std::max<std::int64_t>(k.rec.end_ns - k.rec.start_ns, 0));
                    step_s += ns * 1e-9;
                    if (!filter.passes(d.meta, k.rec)) continue;
                    const Key key = key_of(d.meta, k);
                    Row& r = group(k);
                    durations[key].push_back(ns);
                    if (k.eval || kernel_kind(d.meta, k.rec) != KernelKind::Gemm) continue;
                    if (const auto g = gemm_shape(d.meta, k.rec, tokens)) {
                        r.flops += g->flops();
                        r.flop_ns += ns;
                        auto& seen = shapes[key];
                        if (std::find(seen.begin(), seen.end(), *g) == seen.end()) seen.push_back(*g);
                    }
                    if (k.rec.parent < 0 || k.rec.parent >= static_cast<int>(d.meta.ops.size())) continue;
                    auto [ti, unseen] = rule.try_emplace({recipe, k.rec.parent, k.rec.linear});
                    if (unseen) {
                        const bool named = recipe >= 0 && recipe < static_cast<int>(d.meta.training_recipes.size());
                        const std::string& op = d.meta.ops[static_cast<std::size_t>(k.rec.parent)];
                        const std::string step_recipe =
                            named ? d.meta.training_recipes[static_cast<std::size_t>(recipe)] : std::string();
                        ti->second = gemm_dtypes(gemm_recipe(step_recipe, op, k.rec.linear), op, d.meta.machine,
                                                 gemm_shape(d.meta, k.rec, tokens));
                    }
                    auto& kinds = types[key];
                    if (std::find(kinds.begin(), kinds.end(), ti->second) == kinds.end()) kinds.push_back(ti->second);
                }
            }
            // Steps without records count from their sums: calls, total and max (no
            // distribution of the calls, no layer: a layer filter leaves them out).
            for (std::size_t i = 0; i < sums.size();) {
                const std::int64_t s = sums[i].step;
                std::size_t j = i;
                while (j < sums.size() && sums[j].step == s) ++j;
                const bool read = std::binary_search(recorded.begin(), recorded.end(), s);
                if (!read || !has_kernel_records(rd, s)) {
                    if (!read) ++steps;
                    ++summed_steps;
                    for (std::size_t x = i; x < j; ++x) {
                        const trace::KernelStepRecord& sum = sums[x];
                        step_s += static_cast<double>(sum.total_ns) * 1e-9;
                        const StepKernel k = summed_kernel(d.meta, sum);
                        if (filter.layer >= 0 || !filter.passes(d.meta, k.rec)) continue;
                        Row& r = group(k);
                        r.calls += sum.count;
                        r.total_ns += static_cast<double>(sum.total_ns);
                        r.max_ns = std::isnan(r.max_ns) ? static_cast<double>(sum.max_ns)
                                                        : std::max(r.max_ns, static_cast<double>(sum.max_ns));
                    }
                }
                i = j;
            }
            for (auto& [key, t] : durations) {
                Row r = first[key];
                const auto& seen = shapes[key];
                r.shape = seen.size() == 1 ? seen[0].label() : seen.empty() ? QString() : tr("%1 shapes").arg(seen.size());
                for (const GemmShape& g : seen) r.shapes += (r.shapes.isEmpty() ? "" : ", ") + g.label();
                const auto& kinds = types[key];
                r.dtypes = kinds.size() == 1 ? kinds[0].label() : kinds.empty() ? QString() : tr("%1 dtypes").arg(kinds.size());
                for (const GemmDtypes& t : kinds)
                    r.dtypes_why += (r.dtypes_why.isEmpty() ? "" : "\n") + t.label() + ": " + t.why;
                out.push_back(with_times(std::move(r), t));
            }
            by_total(out);
            return out;
        }
        std::map<int, std::vector<double>> durations;  // op id -> call times, ns
        // Each step's time: recorded, else the span of its ops.
        std::int64_t t0 = INT64_MAX, t1 = INT64_MIN, cur = INT64_MIN;
        const std::vector<double>& time_ms = rd.steps[&trace::StepRecord::step_ms];
        auto close_step = [&] {
            if (cur == INT64_MIN) return;
            ++steps;
            const auto row = rd.step_row_at(cur);
            if (row >= 0 && rd.steps.step[row] == static_cast<double>(cur) && time_ms[row] > 0)
                step_s += time_ms[row] * 1e-3;
            else
                step_s += static_cast<double>(t1 - t0) * 1e-9;
        };
        for (std::size_t i = lo; i < hi; ++i) {
            const auto& op = rd.ops[i];
            if (op.step != cur) {
                close_step();
                cur = op.step;
                t0 = INT64_MAX;
                t1 = INT64_MIN;
            }
            if (filter.passes(d.meta, op)) durations[op.op].push_back(static_cast<double>(op.end_ns - op.start_ns));
            t0 = std::min(t0, op.start_ns);
            t1 = std::max(t1, op.end_ns);
        }
        close_step();
        for (auto& [id, t] : durations) {
            Row r;
            r.name = r.full_name = op_label(d.meta, id);
            out.push_back(with_times(std::move(r), t));
        }
        by_total(out);
        return out;
    });
    beginResetModel();
    rows_ = std::move(rows);
    step_s_ = step_s;
    steps_ = steps;
    summed_steps_ = summed_steps;
    device_ = device;
    endResetModel();
}

int KernelStatsModel::rowCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : static_cast<int>(rows_.size());
}
int KernelStatsModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : ColumnCount; }

double KernelStatsModel::value(int row, int column) const {
    if (row < 0 || row >= rowCount()) return NAN;
    const Row& r = rows_[row];
    switch (column) {
        case Calls: return static_cast<double>(r.calls);
        case TotalMs: return r.total_ns * 1e-6;
        case MeanUs: return r.calls ? r.total_ns * 1e-3 / static_cast<double>(r.calls) : NAN;
        case MedianUs: return r.median_ns * 1e-3;
        case P95Us: return r.p95_ns * 1e-3;
        case MaxUs: return r.max_ns * 1e-3;
        case SharePct: return step_s_ > 0 ? 100.0 * r.total_ns * 1e-9 / step_s_ : NAN;
        case Tflops: return r.flop_ns > 0 ? r.flops / r.flop_ns * 1e-3 : NAN;  // FLOP/ns = 1e9 FLOP/s
        default: return NAN;
    }
}

QVariant KernelStatsModel::data(const QModelIndex& index, int role) const {
    if (!checkIndex(index, CheckIndexOption::IndexIsValid)) return {};
    const Row& r = rows_[index.row()];
    const int c = index.column();
    if (role == Qt::ToolTipRole) {
        if (c == Name) return r.full_name;
        if ((c == Shape || c == Tflops) && !r.shapes.isEmpty())
            return tr("%1 (M x N x K)\n").arg(r.shapes) + tr("M x N x K of the GEMM from its linear's features and the step's tokens (batch_size x seq_len); "
                      "TFLOP/s: 2MNK over the kernels' time.");
        if (c == Dtypes && !r.dtypes_why.isEmpty())
            return r.dtypes_why + tr("\nA x B -> output, from the step's training recipe, the GEMM (fprop X x W, "
                                     "dgrad dY x W, wgrad dY x X) and the trace's device; the trace records no types per kernel.");
        if (c == SharePct && device_)
            return tr("of the scope's device time: the summed duration of the run's kernels, copies and memsets");
    }
    if (role == Qt::DisplayRole || role == Qt::ToolTipRole) {
        if (c == Name) return r.name;
        if (c == FullName) return r.full_name;
        if (c == Shape) return r.shape;
        if (c == Dtypes) return r.dtypes;
        if (c == ParentOp) return r.parent;
        if (c == Kind) return r.kind;
        if (c == Calls) return r.calls;
        return format_figure(value(index.row(), c));
    }
    if (role == kValueRole) {
        if (c == Name) return r.name;
        if (c == FullName) return r.full_name;
        if (c == ParentOp) return r.parent;
        if (c == Kind) return r.kind;
        if (c == Shape) return r.shape;
        if (c == Dtypes) return r.dtypes;
        return value(index.row(), c);
    }
    if (role == Qt::DecorationRole && c == Kind && !r.kind.isEmpty()) return r.color;
    if (role == Qt::TextAlignmentRole && c != Name && c != ParentOp && c != Kind && c != Shape && c != Dtypes && c != FullName)
        return int(Qt::AlignRight | Qt::AlignVCenter);
    return {};
}

QVariant KernelStatsModel::headerData(int section, Qt::Orientation o, int role) const {
    if (o != Qt::Horizontal || role != Qt::DisplayRole) return {};
    static const char* names[ColumnCount] = {"op / kernel", "calls", "total ms", "mean us", "median us",
                                             "p95 us", "max us", "share of time %", "in op", "kind",
                                             "GEMM MxNxK", "GEMM dtypes", "TFLOP/s", "full name"};
    // Device rows' shares are of the kernels' summed time, not of the step's wall time.
    if (section == SharePct && device_) return QStringLiteral("share of device time %");
    if (section == Name && device_)
        return grouping_ == ByOp ? QStringLiteral("op") : grouping_ == ByCategory ? QStringLiteral("category") : QStringLiteral("kernel");
    return section >= 0 && section < ColumnCount ? QString::fromLatin1(names[section]) : QVariant();
}

}  // namespace fp8scope::views
