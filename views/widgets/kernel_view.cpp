// Kernels view.
#include "widgets/kernel_view.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QSpinBox>
#include <QSplitter>
#include <QTableView>
#include <QVBoxLayout>
#include <QSignalBlocker>
#include <algorithm>
#include <map>

#include "models/display_names.h"
#include "widgets/timeline_widget.h"

namespace fp8scope::views {

KernelView::KernelView(const ViewContext& context, QWidget* parent)
    : StoreView(context, "kernels", tr("Kernels"), parent), model_(context.store) {
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
    kind_->addItems({tr("all kernels"), tr("GEMM"), tr("quantize"), tr("capture"), tr("statistics"), tr("communication"), tr("other")});
    // Each kind's swatch in the combo is the legend of the timeline's kernel colours.
    for (int k = 1; k < kind_->count(); ++k) kind_->setItemData(k, kernel_kind_color(static_cast<KernelKind>(k)), Qt::DecorationRole);
    row->addWidget(kind_);
    layer_ = new QComboBox(this);
    layer_->addItem(tr("all layers"), -1);
    row->addWidget(layer_);
    row->addStretch();
    layout->addLayout(row);
    auto* split = new QSplitter(Qt::Vertical, this);
    timeline_ = new TimelineWidget(split);
    view_ = new QTableView(split);
    view_->setModel(&model_);
    view_->verticalHeader()->hide();
    view_->setWordWrap(false);
    view_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    view_->horizontalHeader()->setStretchLastSection(true);
    split->addWidget(timeline_);
    split->addWidget(view_);
    layout->addWidget(split);
    connect(scope_, &QComboBox::currentIndexChanged, this, [this] { refresh(true); });
    connect(steps_, &QSpinBox::valueChanged, this, [this] { refresh(true); });
    connect(kind_, &QComboBox::currentIndexChanged, this, [this] { refresh(true); });
    connect(layer_, &QComboBox::currentIndexChanged, this, [this] { refresh(true); });
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
    if (scope == KernelStatsModel::CursorStep || dataChanged() || scope != shown_scope_ || run != shown_run_ || new_filter)
        model_.refresh(run, step, scope, sel);
    shown_scope_ = scope;
    shown_run_ = run;
    shown_filter_ = sel;
    std::vector<TimelineBox> boxes;
    QStringList lanes;
    ctx().store->read([&](const TraceData& d) {
        if (run < 0 || run >= static_cast<int>(d.runs.size())) return;
        const RunData& rd = d.runs[run];
        const std::size_t lo = rd.ops_of_step(step - steps_->value() + 1).first, hi = rd.ops_of_step(step).second;
        // Lanes from every record in range, filtered or not, so that they stay put while
        // filtering: CPU threads first (device -1), then each GPU's streams.
        std::map<std::pair<int, int>, int> lane_of;  // (device, stream) -> lane
        for (auto i = lo; i < hi; ++i) lane_of[{rd.ops[i].device, rd.ops[i].stream}] = 0;
        for (auto& [key, lane] : lane_of) {
            lane = static_cast<int>(lanes.size());
            lanes << (key.first < 0 ? tr("CPU thread %1").arg(key.second) : tr("GPU %1 stream %2").arg(key.first).arg(key.second));
        }
        std::int64_t t0 = INT64_MAX;
        for (auto i = lo; i < hi; ++i) t0 = std::min(t0, rd.ops[i].start_ns);
        for (auto i = lo; i < hi; ++i) {
            const trace::OpRecord& op = rd.ops[i];
            if (!sel.passes(d.meta, op)) continue;
            QString name = op_label(d.meta, op.op);
            if (op.linear >= 0) name += " " + linear_label(d.meta, op.linear);
            const KernelKind kind = kernel_kind(d.meta, op);
            if (kind != KernelKind::Host)
                name += tr(" [%1%2]").arg(kernel_kind_name(kind), op.parent >= 0 ? " in " + op_label(d.meta, op.parent) : QString());
            if (steps_->value() > 1) name += tr(" (step %1)").arg(op.step);
            // Kernels are coloured by kind; host ops keep a colour per op name.
            const QColor fill = kind == KernelKind::Host ? QColor() : kernel_kind_color(kind);
            const std::int64_t end = std::max(op.end_ns, op.start_ns);  // a reversed record draws as zero length
            boxes.push_back({name, lane_of[{op.device, op.stream}], (op.start_ns - t0) * 1e-3, (end - t0) * 1e-3, op.op, fill});
        }
    });
    timeline_->setBoxes(std::move(boxes), lanes);
}

}  // namespace fp8scope::views
