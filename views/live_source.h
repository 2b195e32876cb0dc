// A live run as a source of the series store: a LiveClient connected to an engine, whose
// reader thread queues records here; a short timer hands them to the store in batches,
// as the file loader does, so the views never know a run is live. Commands (pause,
// switch recipe, ...) are sent off the UI thread and answered by replied().
#pragma once

#include <QObject>
#include <QThreadPool>
#include <QTimer>
#include <atomic>
#include <memory>
#include <mutex>

#include "live_protocol.h"
#include "series_store.h"

namespace fp8scope::live { class LiveClient; }

namespace fp8scope::views {

class LiveSource : public QObject {
    Q_OBJECT
public:
    explicit LiveSource(SeriesStore* store, QObject* parent = nullptr);
    ~LiveSource() override;

    // Connects on a worker thread: attached() or failed(), never a blocked UI. `endpoint`
    // is "unix:PATH", "tcp:HOST:PORT" or "HOST:PORT".
    void attach(const QString& endpoint, const QString& token);
    void detach();
    bool isAttached() const { return attached_.load(); }
    QString endpoint() const { return endpoint_; }

    // Sends a command off the UI thread; replied() says whether the engine took it.
    void send(const live::Command& command, const QString& what);
    // Waits for pending connects and commands (tests).
    bool wait(int timeout_ms) { return pool_.waitForDone(timeout_ms); }

signals:
    void attached(const QString& endpoint);
    void failed(const QString& message);   // could not connect: refused, wrong token, ...
    void closed(const QString& why);       // the engine ended or the connection dropped
    void replied(const QString& what, bool ok, const QString& error);

private:
    void flush();
    struct Pending;
    SeriesStore* store_;
    QThreadPool pool_;
    QTimer flush_;
    QString endpoint_;
    std::shared_ptr<Pending> pending_;   // shared with the client's handlers
    std::shared_ptr<live::LiveClient> client_;
    std::mutex client_mutex_;            // client_ is set on the worker, read by send()
    std::atomic<bool> attached_{false};
};

}  // namespace fp8scope::views
