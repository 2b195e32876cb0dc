// Opens a saved trace off the UI thread: reads it with capture's TraceReader on a worker
// and hands the records to the series store in batches, so the views fill while it reads
// and the UI never waits for the disk. Opening another file starts a new store generation,
// which makes an older load stop and drop its batches. A damaged or foreign file ends in
// failed(path, message) and leaves the store empty and the app working.
//
// A trace still being written (an engine's --out file) is followed: with following on,
// a timer re-reads the file's extent and appends only what is new.
#pragma once

#include <QObject>
#include <QThreadPool>
#include <QTimer>
#include <atomic>
#include <memory>

#include "series_store.h"

namespace fp8scope::trace { class TraceReader; }

namespace fp8scope::views {

class TraceFileLoader : public QObject {
    Q_OBJECT
public:
    explicit TraceFileLoader(SeriesStore* store, QObject* parent = nullptr);
    ~TraceFileLoader() override;

    void open(const QString& path);
    // Opens a file an engine is still creating: until it can be read (its objects exist
    // once the writer starts appending), every poll tries again; after `timeout_ms` the
    // last error is reported. Turns following on.
    void openGrowing(const QString& path, int timeout_ms = 30000);
    // Drops the open file (the store is left to its next owner).
    void close();
    // Following re-reads a growing file every `interval_ms`.
    void setFollowing(bool on, int interval_ms = 500);
    bool following() const { return poll_.isActive(); }
    // Reads what was appended to the open file since the last read (a worker job).
    void poll();
    // Waits for the running load (screenshots, tests); true when it ended in time.
    bool wait(int timeout_ms);
    bool busy() const { return busy_.load() > 0; }

signals:
    void opened(const QString& path);                // metadata read, records streaming in
    void finished(const QString& path, qint64 ms);   // everything read
    void grew(const QString& path, qint64 last_step);  // a followed file had new records
    void failed(const QString& path, const QString& message);

private:
    struct Open;  // the reader of the open file and how far it has been read
    struct Pending;  // a file waiting to become readable
    // False on failure; the error is reported unless `quiet`.
    bool load(const QString& path, bool quiet = false);
    void tryPending();
    void readNew(Open& o, bool notify_growth);
    void fail(const QString& path, const QString& message);

    SeriesStore* store_;
    QThreadPool pool_;  // one thread: loads and polls run in order
    QTimer poll_;
    std::shared_ptr<Open> open_;  // touched only by the worker, except for reset in open()
    std::shared_ptr<Pending> pending_;  // touched only by the worker
    std::atomic<int> busy_{0};
};

}  // namespace fp8scope::views
