// One interface for what fills the series store: a saved or growing trace file
// (TraceFileLoader) and a live run (LiveSource). The views read the store and never know
// which source fills it; the app closes, waits for and listens to either through this class.
//
// A source reads on its own worker threads and hands records to the store in batches
// (deliver). It remembers the store generation it began; once another source begins a newer
// one, or this one is closed, deliver() refuses and the source stops reading, so the newest
// source always wins and a stale one never mixes its records into another's trace.
#pragma once

#include <QObject>
#include <QThreadPool>
#include <atomic>
#include <cstdint>
#include <functional>

#include "models/series_store.h"

namespace fp8scope::views {

class DataSource : public QObject {
    Q_OBJECT
public:
    // Stops delivering (a file is let go, a live run detached); the store keeps what it
    // holds for its next owner. Emits nothing.
    virtual void close() = 0;
    // Waits for the source's worker jobs (loads, polls, connects, commands); true when they
    // ended in time. For screenshots and tests: the UI itself never waits.
    bool wait(int timeout_ms) { return workers_.waitForDone(timeout_ms); }

signals:
    // `name` is the source's file path or endpoint. Queued to the source's thread.
    void opened(const QString& name);  // a new trace began in the store; records stream in
    void finished(const QString& name, qint64 ms);  // all there was has been read (a file)
    void failed(const QString& name, const QString& message);  // a message a user can act on
    void closed(const QString& name, const QString& why);  // it ended on its own (a live run)

protected:
    DataSource(SeriesStore* store, int worker_threads, QObject* parent);
    // Derived destructors call this: the workers' jobs use the derived class's members.
    void shutdown();
    QThreadPool& workers() { return workers_; }
    SeriesStore* store() const { return store_; }

    // Starts a new trace in the store (any thread); later deliveries belong to it.
    void begin(trace::TraceMeta meta, std::vector<RankRun> rank_runs = {});
    bool begun() const { return generation_.load() != 0; }
    // Appends a batch to this source's trace (any thread). False when the store moved on to
    // a newer trace or the source ended: the caller stops reading.
    bool deliver(TraceBatch batch);
    // No deliveries until the next begin().
    void end() { generation_ = 0; }
    // Runs `f` on this object's thread, unless the source is gone by then: how workers emit.
    void post(std::function<void()> f);

private:
    SeriesStore* store_;
    QThreadPool workers_;
    std::atomic<std::uint64_t> generation_{0};  // 0: no trace of this source's in the store
};

}  // namespace fp8scope::views
