// A live run as a source of the series store: a LiveClient connected to an engine, whose
// reader thread queues records here; a short timer hands them to the store in batches,
// so the views never know a run is live. Commands (pause, switch recipe, ...) are sent off
// the UI thread and answered by replied().
#pragma once

#include <QTimer>
#include <atomic>
#include <memory>
#include <mutex>

#include "live_protocol.h"
#include "models/data_source.h"

namespace fp8scope::live { class LiveClient; struct ClientHandlers; }

namespace fp8scope::views {

class LiveSource : public DataSource {
    Q_OBJECT
public:
    explicit LiveSource(SeriesStore* store, QObject* parent = nullptr);
    ~LiveSource() override;

    // Connects on a worker thread: opened(endpoint) or failed(endpoint, message), never a
    // blocked UI. `endpoint` is "unix:PATH", "tcp:HOST:PORT" or "HOST:PORT". When the
    // engine ends or the connection drops: closed(endpoint, why).
    void attach(const QString& endpoint, const QString& token);
    // Detaches from the run; the store keeps what arrived.
    void close() override;
    bool isAttached() const { return attached_.load(); }
    QString endpoint() const { return endpoint_; }

    // Sends a command off the UI thread; replied() says whether the engine took it.
    void send(const live::Command& command, const QString& what);

signals:
    void replied(const QString& what, bool ok, const QString& error);

private:
    struct Pending;
    live::ClientHandlers handlers(const std::shared_ptr<Pending>& pending);
    void connectTo(const std::shared_ptr<Pending>& pending, const QString& endpoint, const QString& token);
    void flush();

    QTimer flush_;
    QString endpoint_;
    std::shared_ptr<Pending> pending_;   // shared with the client's handlers
    std::shared_ptr<live::LiveClient> client_;
    std::mutex client_mutex_;            // guards client_ (set on a worker) and pending_ writes
    std::atomic<bool> attached_{false};
};

}  // namespace fp8scope::views
