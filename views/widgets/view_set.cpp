// View set: creation and the redraw wiring.
#include "widgets/view_set.h"

#include <QPointer>

#include "widgets/amax_view.h"
#include "widgets/blockmap_view.h"
#include "widgets/error_view.h"
#include "widgets/events_view.h"
#include "widgets/findings_view.h"
#include "widgets/fp8_worth_view.h"
#include "widgets/health_view.h"
#include "widgets/kernel_view.h"
#include "widgets/layers_view.h"
#include "widgets/loss_view.h"
#include "widgets/outliers_view.h"

namespace fp8scope::views {

ViewSet::ViewSet(SeriesStore* store, StepCursor* cursor, Selection* selection, QObject* parent)
    : QObject(parent), store_(store), cursor_(cursor), selection_(selection) {
    const ViewContext ctx{store, cursor, selection};
    views_ = {new LossView(ctx),  new AmaxView(ctx),   new OutliersView(ctx), new ErrorView(ctx),
              new BlockMapView(ctx), new KernelView(ctx), new LayersView(ctx),   new EventsView(ctx),
              new HealthView(ctx), new FindingsView(ctx), new Fp8WorthView(ctx)};
    connect(store, &SeriesStore::changed, &scheduler_, &RedrawScheduler::markDataDirty);
    connect(cursor, &StepCursor::stepChanged, &scheduler_, &RedrawScheduler::markDirty);
    connect(selection, &Selection::changed, &scheduler_, &RedrawScheduler::markDirty);
    scheduler_.addClient([this] { onRedraw(); });
}

ViewSet::~ViewSet() {
    for (StoreView* v : views_)
        if (!v->parent()) delete v;
}

QStringList ViewSet::names() {
    return {"loss", "amax", "outliers", "error", "blocks", "kernels", "layers", "events", "health", "findings", "fp8worth"};
}

FindingsView* ViewSet::findings() const { return static_cast<FindingsView*>(view("findings")); }

StoreView* ViewSet::view(const QString& name) const {
    for (StoreView* v : views_)
        if (v->name() == name) return v;
    return nullptr;
}

void ViewSet::onRedraw() {
    const auto [first, last] = store_->read([](const TraceData& d) { return std::pair(d.first_step, d.last_step); });
    {
        // Setting the range can move the cursor; that redraw is this one.
        const QSignalBlocker block(&scheduler_);
        cursor_->setRange(first, last);
    }
    for (StoreView* v : views_) v->refresh();
}

}  // namespace fp8scope::views
