// Kernels view.
#include "widgets/kernel_view.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QTabWidget>
#include <QPushButton>
#include <QSpinBox>
#include <QSplitter>
#include <QTableView>
#include <QVBoxLayout>
#include <QSignalBlocker>
#include <algorithm>
#include <map>
#include <tuple>

#include "chrome_trace_events.h"
#include "kernel_launches.h"
#include "models/counter_tracks.h"
#include "models/display_names.h"
#include "models/gemm_shape.h"
#include "models/kernel_detail.h"
#include "widgets/compare_run_combo.h"
#include "widgets/counter_strip.h"
#include "widgets/step_cost_plot.h"
#include "widgets/timeline_widget.h"

namespace fp8scope::views {

KernelView::KernelView(const ViewContext& context, QWidget* parent)
    : StoreView(context, "kernels", tr("Kernels"), parent), model_(context.store), compare_model_(context.store) {
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    auto* row = new QHBoxLayout;
    row->addWidget(new QLabel(tr("timeline: last"), this));
    steps_ = new QSpinBox(this);
    steps_->setRange(1, 100);
    steps_->setValue(1);
    steps_->setSuffix(tr(" step(s) to the cursor"));
    row->addWidget(steps_);
    row->addSpacing(20);
    row->addWidget(new QLabel(tr("statistics over:"), this));
    scope_ = new QComboBox(this);
    scope_->addItems({tr("the cursor step"), tr("the whole run")});
    row->addWidget(scope_);
    row->addSpacing(20);
    row->addWidget(new QLabel(tr("show:"), this));
    kind_ = new QComboBox(this);
    // KernelFilter's order.
    kind_->addItem(tr("all kernels"));
    for (int k = 1; k < kKernelKinds; ++k) kind_->addItem(kernel_kind_name(static_cast<KernelKind>(k)));
    // Each kind's swatch in the combo is the legend of the timeline's kernel colours.
    for (int k = 1; k < kind_->count(); ++k) kind_->setItemData(k, kernel_kind_color(static_cast<KernelKind>(k)), Qt::DecorationRole);
    row->addWidget(kind_);
    layer_ = new QComboBox(this);
    layer_->addItem(tr("all layers"), -1);
    row->addWidget(layer_);
    row->addSpacing(20);
    row->addWidget(new QLabel(tr("group by:"), this));
    grouping_ = new QComboBox(this);
    grouping_->addItems({tr("kernel"), tr("op"), tr("category")});  // KernelStatsModel::Grouping's order
    row->addWidget(grouping_);
    row->addStretch();
    record_ = new QPushButton(tr("record kernels of the next"), this);
    record_->setToolTip(tr("Asks the live run to keep every kernel's record of the next steps (the trace keeps them "
                           "on capture steps and around events otherwise; every step has its kernel sums)"));
    record_steps_ = new QSpinBox(this);
    record_steps_->setRange(1, 100000);
    record_steps_->setValue(20);
    record_steps_->setSuffix(tr(" steps"));
    row->addWidget(record_);
    row->addWidget(record_steps_);
    setLiveControl(false);
    connect(record_, &QPushButton::clicked, this, [this] { emit recordKernelsRequested(record_steps_->value()); });
    layout->addLayout(row);
    note_ = new QLabel(this);
    note_->setWordWrap(true);
    note_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    note_->hide();
    layout->addWidget(note_);
    auto* counters_row = new QHBoxLayout;
    counters_row->addWidget(new QLabel(tr("counters: loss, learning rate, and amax and scale of"), this));
    operands_ = new QLineEdit(this);
    operands_->setPlaceholderText(tr("operands, e.g. L0 qkv fprop x, L0 qkv fprop w"));
    operands_->setToolTip(tr("Comma-separated operand labels, as the Layers table writes them"));
    counters_row->addWidget(operands_, 1);
    layout->addLayout(counters_row);
    auto* split = new QSplitter(Qt::Vertical, this);
    costs_ = new StepCostPlot(split);
    auto* lanes = new QWidget(split);
    auto* lanes_layout = new QVBoxLayout(lanes);
    lanes_layout->setContentsMargins(0, 0, 0, 0);
    lanes_layout->setSpacing(0);
    timeline_ = new TimelineWidget(lanes);
    strip_ = new CounterStrip(timeline_, lanes);
    lanes_layout->addWidget(timeline_, 1);
    lanes_layout->addWidget(strip_);
    tabs_ = new QTabWidget(split);
    auto* table = new QWidget(tabs_);
    auto* table_layout = new QVBoxLayout(table);
    table_layout->setContentsMargins(0, 0, 0, 0);
    table_note_ = new QLabel(table);
    table_note_->hide();
    table_layout->addWidget(table_note_);
    view_ = new QTableView(table);
    table_layout->addWidget(view_);
    view_->setModel(&model_);
    view_->verticalHeader()->hide();
    view_->setWordWrap(false);
    view_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    view_->horizontalHeader()->setStretchLastSection(true);
    // A long kernel name is cut in the middle (the whole name is on hover), so the GEMM
    // columns at the right stay in view.
    view_->horizontalHeader()->setMaximumSectionSize(340);
    view_->setTextElideMode(Qt::ElideMiddle);
    tabs_->addTab(table, tr("kernels"));
    auto* compare = new QWidget(tabs_);
    auto* compare_layout = new QVBoxLayout(compare);
    compare_layout->setContentsMargins(0, 2, 0, 0);
    compare_run_ = add_compare_run_row(compare_layout, compare);
    compare_sorted_.setSourceModel(&compare_model_);
    compare_sorted_.setSortRole(Qt::UserRole);
    auto* compare_table = new QTableView(compare);
    compare_table->setModel(&compare_sorted_);
    compare_table->horizontalHeader()->setSortIndicator(-1, Qt::AscendingOrder);  // the model's order: total, most saved first
    compare_table->setSortingEnabled(true);
    compare_table->verticalHeader()->hide();
    compare_table->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    compare_layout->addWidget(compare_table);
    tabs_->addTab(compare, tr("run vs run, per op"));
    tabs_->setTabToolTip(1, tr("Kernel time per op at the cursor step: the run compared with and the selected run, "
                               "and what the selected run saves (a negative figure: what it costs more)"));
    split->addWidget(costs_);
    split->addWidget(lanes);
    split->addWidget(tabs_);
    split->setSizes({220, 200, 300});
    connect(operands_, &QLineEdit::editingFinished, this, [this] { setCounterOperands(operands_->text()); });
    connect(compare_run_, &QComboBox::currentIndexChanged, this, [this] { refresh(true); });
    layout->addWidget(split);
    connect(scope_, &QComboBox::currentIndexChanged, this, [this] { refresh(true); });
    connect(steps_, &QSpinBox::valueChanged, this, [this] { refresh(true); });
    connect(kind_, &QComboBox::currentIndexChanged, this, [this] { refresh(true); });
    connect(layer_, &QComboBox::currentIndexChanged, this, [this] { refresh(true); });
    connect(grouping_, &QComboBox::currentIndexChanged, this, [this] {
        shown_run_ = -1;  // the table regroups
        refresh(true);
    });
    connect(view_->selectionModel(), &QItemSelectionModel::currentRowChanged, this, [this] { highlight(); });
    connect(&model_, &QAbstractItemModel::modelReset, this, [this] { highlight(); });
    connect(costs_, &StepCostPlot::stepClicked, this, [this](std::int64_t s) { ctx().cursor->setStep(s); });
    connect(costs_, &StepCostPlot::stepsShown, this, &StoreView::stepsShown);
}

QStringList KernelView::setCounterOperands(const QString& labels) {
    QStringList unknown;
    counter_operands_ = ctx().store->read([&](const TraceData& d) { return parse_operand_list(d.meta, labels, &unknown); });
    if (operands_->text() != labels) operands_->setText(labels);
    operands_->setStyleSheet(unknown.isEmpty() ? QString() : QStringLiteral("color: #b00020"));
    operands_->setToolTip(unknown.isEmpty() ? tr("Comma-separated operand labels, as the Layers table writes them")
                                            : tr("no such operand: %1").arg(unknown.join(", ")));
    refresh(true);
    return unknown;
}

std::vector<OperandRef> KernelView::counterOperands() const {
    return operands_->text().trimmed().isEmpty() ? ctx().selection->operands() : counter_operands_;
}

void KernelView::compareWith(int run) {
    compare_run_->chooseRun(run);
    refresh(true);
}

void KernelView::showComparison(bool on) { tabs_->setCurrentIndex(on ? 1 : 0); }

void KernelView::setGrouping(KernelStatsModel::Grouping g) { grouping_->setCurrentIndex(g); }

QString KernelView::detailNote() const { return note_->text(); }
QString KernelView::tableNote() const { return table_note_->text(); }

void KernelView::setLiveControl(bool on) {
    record_->setVisible(on);
    record_steps_->setVisible(on);
}

void KernelView::selectRow(int row) {
    if (row < 0) view_->selectionModel()->clearCurrentIndex();
    else view_->setCurrentIndex(model_.index(row, 0));
    highlight();
}

void KernelView::highlight() {
    const int row = view_->currentIndex().isValid() ? view_->currentIndex().row() : -1;
    std::vector<bool> on(box_kernels_.size(), false);
    if (row >= 0)
        ctx().store->read([&](const TraceData& d) {
            for (std::size_t i = 0; i < box_kernels_.size(); ++i) on[i] = model_.matches(row, d.meta, box_kernels_[i]);
        });
    timeline_->setHighlighted(on);
}

void KernelView::setKindFilter(KernelFilter f) { kind_->setCurrentIndex(static_cast<int>(f)); }
void KernelView::setLayerFilter(int layer) {
    fillLayers();
    layer_->setCurrentIndex(std::max(0, layer_->findData(layer)));
}

KernelSelection KernelView::filter() const {
    return {static_cast<KernelFilter>(kind_->currentIndex()), layer_->currentData().toInt()};
}

// The layer combo lists the layers the trace's linears belong to; kept when unchanged so
// the choice survives redraws.
void KernelView::fillLayers() {
    std::vector<int> layers = ctx().store->read([](const TraceData& d) {
        std::vector<int> out;
        for (const auto& l : d.meta.linears)
            if (std::find(out.begin(), out.end(), l.layer) == out.end()) out.push_back(l.layer);
        std::sort(out.begin(), out.end());
        return out;
    });
    bool same = layer_->count() == static_cast<int>(layers.size()) + 1;
    for (int i = 1; same && i < layer_->count(); ++i) same = layer_->itemData(i).toInt() == layers[static_cast<std::size_t>(i - 1)];
    if (same) return;
    const QSignalBlocker block(layer_);
    const int chosen = layer_->currentData().toInt();
    while (layer_->count() > 1) layer_->removeItem(1);
    for (int l : layers) layer_->addItem(tr("layer %1").arg(l), l);
    layer_->setCurrentIndex(std::max(0, layer_->findData(chosen)));
}

void KernelView::setScope(KernelStatsModel::Scope s) { scope_->setCurrentIndex(s); }
void KernelView::setTimelineSteps(int n) { steps_->setValue(n); }

void KernelView::redraw() {
    const int run = ctx().selection->run();
    const std::int64_t step = ctx().cursor->step();
    const auto scope = static_cast<KernelStatsModel::Scope>(scope_->currentIndex());
    if (dataChanged()) fillLayers();
    const KernelSelection sel = filter();
    const bool new_filter = sel.kind != shown_filter_.kind || sel.layer != shown_filter_.layer;
    // A whole-run table changes with the data only, not with the cursor.
    const auto grouping = static_cast<KernelStatsModel::Grouping>(grouping_->currentIndex());
    if (scope == KernelStatsModel::CursorStep || dataChanged() || scope != shown_scope_ || run != shown_run_ || new_filter)
        model_.refresh(run, step, scope, sel, grouping);
    // A large trace's cursor step whose kernel sums were decimated away: read for the table
    // (and the comparison's), which says so meanwhile.
    const auto [sums_note, sums_wanted] = ctx().store->read([&](const TraceData& d) {
        return std::pair(kernel_sums_note(d, run, step), kernel_sums_wanted(d, step));
    });
    table_note_->setText(scope == KernelStatsModel::CursorStep ? sums_note : QString());
    table_note_->setVisible(!table_note_->text().isEmpty());
    if (sums_wanted && std::pair(ctx().store->generation(), step) != asked_sums_) {
        asked_sums_ = {ctx().store->generation(), step};
        emit kernelSumsWanted(step);
    }
    if (dataChanged() || run != costs_run_) {
        costs_->setSteps(ctx().store->read([&](const TraceData& d) { return run_breakdown(d, run); }));
        const QString note = ctx().store->read([&](const TraceData& d) { return kernel_detail_note(d, run); });
        note_->setText(note);
        note_->setVisible(!note.isEmpty());
    }
    costs_run_ = run;
    costs_->setCursorStep(step);
    if (dataChanged()) ctx().store->read([&](const TraceData& d) { compare_run_->fill(d.meta); });
    compare_model_.refresh(compare_run_->otherThan(run), run, step);
    shown_scope_ = scope;
    shown_run_ = run;
    shown_filter_ = sel;
    std::vector<TimelineBox> boxes;
    box_kernels_.clear();
    QStringList lanes;
    std::vector<int> launcher;  // per box
    std::vector<StripTrack> tracks;
    ctx().store->read([&](const TraceData& d) {
        if (run < 0 || run >= static_cast<int>(d.runs.size())) return;
        const std::int64_t first = step - steps_->value() + 1;
        // The run's host ops, then its device records as attributed per step (records with
        // no op and evaluation put back by time: kernel_attribution.h); of every rank, for
        // a job opened from its rank traces.
        std::vector<StepKernel> records;
        std::vector<int> rank_of;  // per record
        for (const auto& [r, rank] : job_runs(d, run)) {
            const RunData& rd = d.runs[static_cast<std::size_t>(r)];
            const std::size_t lo = rd.ops_of_step(first).first, hi = rd.ops_of_step(step).second;
            for (auto i = lo; i < hi; ++i)
                if (!is_device(rd.ops[i])) records.push_back({rd.ops[i], false});
            for (auto i = lo; i < hi;) {
                const std::int64_t s = rd.ops.step(i);
                while (i < hi && rd.ops.step(i) == s) ++i;
                for (StepKernel& k : step_kernels(d, r, s)) records.push_back(std::move(k));
            }
            rank_of.resize(records.size(), rank);
        }
        // Lanes from every record in range, filtered or not, so that they stay put while
        // filtering: per rank, CPU threads first (device -1), then each GPU's streams.
        std::map<std::tuple<int, int, int>, int> lane_of;  // (rank, device, stream) -> lane
        for (std::size_t i = 0; i < records.size(); ++i) lane_of[{rank_of[i], records[i].rec.device, records[i].rec.stream}] = 0;
        for (auto& [key, lane] : lane_of) {
            const auto [rank, device, stream] = key;
            lane = static_cast<int>(lanes.size());
            const QString where = device < 0 ? tr("CPU thread %1").arg(stream) : tr("GPU %1 stream %2").arg(device).arg(stream);
            lanes << (rank < 0 ? where : tr("rank %1 %2").arg(rank).arg(where));
        }
        std::int64_t t0 = INT64_MAX;
        for (const auto& k : records) t0 = std::min(t0, k.rec.start_ns);
        const std::int64_t tokens = step_tokens(d.meta);
        // Which record launched which (kernel_launches.h), then as box indices.
        std::vector<trace::OpRecord> plain;
        plain.reserve(records.size());
        for (const auto& k : records) plain.push_back(k.rec);
        const std::vector<std::ptrdiff_t> launched_by = trace::launching_ops(plain);
        std::vector<int> box_of(records.size(), -1);
        // The counters, each value from its step's first record on.
        const auto step_start = trace::step_starts(plain);
        for (const CounterTrack& t : counter_tracks(d, run, first, step, counterOperands())) {
            StripTrack s{t.name, {}};
            for (const auto& [at, value] : t.points)
                if (const auto it = step_start.find(at); it != step_start.end()) s.points.emplace_back((it->second - t0) * 1e-3, value);
            if (!s.points.empty()) tracks.push_back(std::move(s));
        }
        for (std::size_t ri = 0; ri < records.size(); ++ri) {
            const StepKernel& k = records[ri];
            const trace::OpRecord& op = k.rec;
            if (!sel.passes(d.meta, op)) continue;
            box_of[ri] = static_cast<int>(boxes.size());
            launcher.push_back(launched_by[ri] >= 0 ? box_of[static_cast<std::size_t>(launched_by[ri])] : -1);
            const KernelKind kind = kernel_kind(d.meta, op);
            const QString full = op_label(d.meta, op.op);
            QString name = kind == KernelKind::Host ? full : short_kernel_name(full);
            if (op.linear >= 0) name += " " + linear_label(d.meta, op.linear);
            if (op.operand >= 0 && op.operand < 3) name += " " + operand_label(static_cast<Operand>(op.operand));
            QString detail;
            if (kind != KernelKind::Host) {
                const QString in = k.eval ? QStringLiteral("eval") : op.parent >= 0 ? op_label(d.meta, op.parent) : tr("no op");
                name += tr(" [%1 in %2]").arg(kernel_kind_name(kind), in);
                detail = full;
                if (op.operand >= 0 && op.operand < 3)
                    detail += tr("\noperand: %1 (the operand its op handled)").arg(operand_label(static_cast<Operand>(op.operand)));
                if (const auto g = kind == KernelKind::Gemm && !k.eval ? gemm_shape(d.meta, op, tokens) : std::nullopt;
                    g && op.end_ns > op.start_ns)
                    detail += tr("\nGEMM %1 (MxNxK), %2 TFLOP/s").arg(g->label())
                                  .arg(g->flops() / static_cast<double>(op.end_ns - op.start_ns) * 1e-3, 0, 'f', 1);
            }
            if (steps_->value() > 1) name += tr(" (step %1)").arg(op.step);
            // Kernels are coloured by kind; host ops keep a colour per op name.
            const QColor fill = kind == KernelKind::Host ? QColor() : kernel_kind_color(kind);
            const std::int64_t end = std::max(op.end_ns, op.start_ns);  // a reversed record draws as zero length
            boxes.push_back({name, lane_of[{rank_of[ri], op.device, op.stream}], (op.start_ns - t0) * 1e-3, (end - t0) * 1e-3, op.op, fill, detail});
            box_kernels_.push_back(k);
        }
    });
    // A step without its kernel records shows its host ops; the note says where they are,
    // or that a large trace's records of the steps shown are being read.
    const std::int64_t first = step - steps_->value() + 1;
    const auto [note, want] = ctx().store->read([&](const TraceData& d) {
        return std::pair(timeline_note(d, run, first, step), kernel_records_wanted(d, first, step));
    });
    timeline_->setNote(note);
    if (want && std::tuple(ctx().store->generation(), want->first, want->second) != asked_) {
        asked_ = {ctx().store->generation(), want->first, want->second};
        emit kernelRecordsWanted(want->first, want->second);
    }
    timeline_->setBoxes(std::move(boxes), lanes, std::move(launcher));
    strip_->setTracks(std::move(tracks));
    highlight();
}

}  // namespace fp8scope::views
