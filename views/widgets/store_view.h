// The base of every view: a widget over the series store that redraws from it when the
// redraw scheduler asks (and only while on screen: not while hidden, nor while its dock is
// tabbed behind another, which Qt keeps visible off the window), and exports itself as
// PNG or PDF and, when it has one, its table as CSV.
#pragma once

#include <QAbstractItemModel>
#include <QWidget>

#include "models/selection.h"
#include "models/series_store.h"
#include "models/step_cursor.h"

namespace fp8scope::views {

struct ViewContext {
    const SeriesStore* store = nullptr;
    StepCursor* cursor = nullptr;
    Selection* selection = nullptr;
};

class StoreView : public QWidget {
    Q_OBJECT
public:
    StoreView(const ViewContext& ctx, const QString& name, const QString& title, QWidget* parent = nullptr);

    QString name() const { return objectName(); }   // "loss", "amax", ... (--view NAME)
    QString title() const { return title_; }
    // Redraws from the store if on screen (or `force`): new data, cursor or selection.
    void refresh(bool force = false);
    // Visible with some of it on screen.
    bool onScreen() const;
    // Redraws if something changed while it was off screen (its dock's tab was raised).
    void redrawIfStale();
    // PNG or PDF by extension; false with `error` set when it cannot be written.
    bool exportImage(const QString& path, QString* error) const;
    // The view's table for CSV export, if it has one.
    virtual const QAbstractItemModel* table() const { return nullptr; }

signals:
    // A step plot of the view was zoomed or panned to steps [first, last] (announced once
    // the range rests; step_zoom.h): a large trace's steps there are read at full detail.
    void stepsShown(qint64 first, qint64 last);
    // The view shows steps [first, last] of a large trace whose op and kernel records the
    // store does not hold (before its newest steps): they are read and join the store.
    void kernelRecordsWanted(qint64 first, qint64 last);
    // The view shows the amax and scale at `step`, which the store holds of a large trace
    // only decimated: they are read whole.
    void scalingWanted(qint64 step);
    // The same for the kernel sums at `step`, which a large trace's decimation left out.
    void kernelSumsWanted(qint64 step);

protected:
    virtual void redraw() = 0;
    void showEvent(QShowEvent* e) override;
    const ViewContext& ctx() const { return ctx_; }
    // True when the store changed since the last redraw (plot data must be rebuilt);
    // false when only the cursor or the selection moved.
    bool dataChanged() const { return data_changed_; }

private:
    ViewContext ctx_;
    QString title_;
    std::uint64_t seen_revision_ = ~0ull;
    bool data_changed_ = true, stale_ = true;
};

}  // namespace fp8scope::views
