// Every view over one store, cursor and selection, created together and refreshed
// together by one coalescing scheduler. The main window, the screenshot mode, tests and
// the benchmark all build their views through this.
#pragma once

#include <QObject>
#include <vector>

#include "models/redraw_scheduler.h"
#include "widgets/store_view.h"

namespace fp8scope::views {

class FindingsView;

class ViewSet : public QObject {
    Q_OBJECT
public:
    // The views are created without a parent: their owner (docks, a test) adopts them.
    ViewSet(SeriesStore* store, StepCursor* cursor, Selection* selection, QObject* parent = nullptr);
    ~ViewSet() override;

    const std::vector<StoreView*>& views() const { return views_; }
    StoreView* view(const QString& name) const;  // nullptr when unknown
    FindingsView* findings() const;
    static QStringList names();
    RedrawScheduler* scheduler() { return &scheduler_; }
    // Refreshes the cursor range and every visible view now.
    void refreshNow() { scheduler_.flush(); }

private:
    void onRedraw();
    SeriesStore* store_;
    StepCursor* cursor_;
    Selection* selection_;
    RedrawScheduler scheduler_;
    std::vector<StoreView*> views_;
};

}  // namespace fp8scope::views
