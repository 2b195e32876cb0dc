// The coalescing redraw timer: any number of store appends, cursor moves and selection
// changes within one interval cause one refresh of each registered client. What the user
// does (cursor, selection) is redrawn within `interval_ms`; new data, which a live run
// brings every few milliseconds, at most every `data_interval_ms` and never more than a
// twentieth of the time: after a refresh that took t ms of CPU the next data refresh waits 19 t
// (at most kMaxDataGapMs). A followed run then costs the GUI a small share of a core
// however fast it trains.
#pragma once

#include <QElapsedTimer>
#include <QObject>
#include <QTimer>
#include <functional>
#include <vector>

namespace fp8scope::views {

class RedrawScheduler : public QObject {
    Q_OBJECT
public:
    static constexpr int kDataIntervalMs = 500;
    static constexpr int kBusyShare = 20;  // data refreshes keep the GUI busy at most 1/kBusyShare of the time
    static constexpr int kMaxDataGapMs = 3000;

    explicit RedrawScheduler(int interval_ms = 33, int data_interval_ms = kDataIntervalMs, QObject* parent = nullptr);

    // Called on every refresh, in the order added.
    void addClient(std::function<void()> refresh);
    int refreshCount() const { return refreshes_; }
    // How long a refresh asked for now waits: `data` for new data, else a user's change;
    // `since_last_ms` since the last refresh ended, which took `last_cost_ms`.
    static int delayFor(bool data, qint64 since_last_ms, qint64 last_cost_ms, int interval_ms, int data_interval_ms);

public slots:
    // A cursor move or selection change: thread-safe through a queued connection; cheap
    // to call often.
    void markDirty();
    // New data in the store: the same, at the data pace.
    void markDataDirty();
    // Runs the pending refresh now (screenshots, tests).
    void flush();

private:
    void schedule(bool data);
    QTimer timer_;
    QElapsedTimer since_last_;  // since the last refresh ended
    qint64 last_cost_ms_ = 0;
    int interval_ms_, data_interval_ms_;
    std::vector<std::function<void()>> clients_;
    int refreshes_ = 0;
};

}  // namespace fp8scope::views
