// Opens a saved trace off the UI thread: reads it with capture's TraceReader on a worker
// and hands the records to the series store in batches, so the views fill while it reads
// and the UI never waits for the disk. Opening another file starts a new store generation,
// which makes an older load stop and drop its batches. A damaged or foreign file ends in
// failed(path, message) and leaves the store empty and the app working.
#pragma once

#include <QObject>
#include <QThreadPool>
#include <atomic>

#include "series_store.h"

namespace fp8scope::views {

class TraceFileLoader : public QObject {
    Q_OBJECT
public:
    explicit TraceFileLoader(SeriesStore* store, QObject* parent = nullptr);
    ~TraceFileLoader() override;

    void open(const QString& path);
    // Waits for the running load (screenshots, tests); true when it ended in time.
    bool wait(int timeout_ms);
    bool busy() const { return busy_.load() > 0; }

signals:
    void opened(const QString& path);                // metadata read, records streaming in
    void finished(const QString& path, qint64 ms);   // everything read
    void failed(const QString& path, const QString& message);

private:
    void load(const QString& path);
    SeriesStore* store_;
    QThreadPool pool_;
    std::atomic<int> busy_{0};
};

}  // namespace fp8scope::views
