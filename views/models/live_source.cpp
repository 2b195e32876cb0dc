// Live records to the store. The client's handlers run on its reader thread and only
// append to a pending batch under a mutex; the UI thread's flush timer delivers that batch,
// so the store takes one lock per tick however fast the engine streams.
#include "models/live_source.h"

#include <optional>

#include "live_client.h"

namespace fp8scope::views {

namespace {
constexpr int kFlushMs = 50;
}

// What the reader thread received since the last flush.
struct LiveSource::Pending {
    std::mutex mutex;
    std::optional<trace::TraceMeta> meta;  // the engine's metadata: a new trace
    TraceBatch batch;
};

LiveSource::LiveSource(SeriesStore* store, QObject* parent)
    : DataSource(store, 2, parent) {  // two workers: a connect and a command may overlap
    connect(&flush_, &QTimer::timeout, this, &LiveSource::flush);
}

LiveSource::~LiveSource() {
    close();
    shutdown();
}

void LiveSource::attach(const QString& endpoint, const QString& token) {
    close();
    endpoint_ = endpoint;
    auto pending = std::make_shared<Pending>();
    {
        std::lock_guard lock(client_mutex_);  // an older connect's worker reads pending_
        pending_ = pending;
    }
    workers().start([this, pending, endpoint, token] { connectTo(pending, endpoint, token); });
}

// Runs on a worker. close() joins the client's reader, so the handlers may use `this`.
void LiveSource::connectTo(const std::shared_ptr<Pending>& pending, const QString& endpoint, const QString& token) {
    try {
        auto client = std::make_shared<live::LiveClient>(live::parse_endpoint(endpoint.toStdString()),
                                                         token.toStdString(), handlers(pending));
        {
            std::lock_guard lock(client_mutex_);
            if (pending_ != pending) return;  // detached or re-attached meanwhile
            client_ = client;
        }
        attached_ = true;
        post([this, endpoint] {
            flush_.start(kFlushMs);
            emit opened(endpoint);
        });
    } catch (const std::exception& e) {
        const QString msg = QStringLiteral("%1: %2").arg(endpoint, QString::fromStdString(e.what()));
        post([this, endpoint, msg] { emit failed(endpoint, msg); });
    }
}

live::ClientHandlers LiveSource::handlers(const std::shared_ptr<Pending>& pending) {
    live::ClientHandlers h;
    auto add = [pending](const auto& record) {
        std::lock_guard lock(pending->mutex);
        pending->batch.add(record);
    };
    h.on_meta = [pending](const trace::TraceMeta& m) {
        std::lock_guard lock(pending->mutex);
        pending->meta = m;
    };
    h.on_step = add;
    h.on_event = add;
    h.on_scaling = add;
    h.on_operand = add;
    h.on_blockmap = add;
    h.on_op = add;
    h.on_kernel_step = add;
    h.on_op_name = add;  // a kernel name after the meta: the store adds it to the op table
    h.on_rank_step = add;
    h.coalesce_ms = kFlushMs;  // the store takes them every kFlushMs anyway
    h.on_closed = [this, pending](const std::string& why) {
        const QString msg = QString::fromStdString(why);
        post([this, pending, msg] {
            if (pending_ != pending) return;  // a connection already let go
            flush();
            attached_ = false;
            flush_.stop();
            emit closed(endpoint_, msg);
        });
    };
    return h;
}

void LiveSource::close() {
    flush_.stop();
    std::shared_ptr<live::LiveClient> client;
    {
        std::lock_guard lock(client_mutex_);
        client = std::move(client_);
        pending_.reset();
    }
    attached_ = false;
    end();
    if (client) client->close();
}

void LiveSource::flush() {
    auto pending = pending_;
    if (!pending) return;
    TraceBatch batch;
    {
        std::lock_guard lock(pending->mutex);
        if (pending->meta) {
            // The engine's metadata starts a new trace in the store, as opening a file does.
            begin(std::move(*pending->meta));
            pending->meta.reset();
        }
        if (!begun()) return;
        std::swap(batch, pending->batch);
    }
    if (!deliver(std::move(batch))) close();  // another source took over
}

void LiveSource::send(const live::Command& command, const QString& what) {
    std::shared_ptr<live::LiveClient> client;
    {
        std::lock_guard lock(client_mutex_);
        client = client_;
    }
    if (!client) {
        emit replied(what, false, tr("not attached to a run"));
        return;
    }
    workers().start([this, client, command, what] {
        live::CommandReply r;
        try {
            r = client->send(command);
        } catch (const std::exception& e) {
            r = {false, e.what()};
        }
        const QString error = QString::fromStdString(r.error);
        post([this, what, r, error] { emit replied(what, r.ok, error); });
    });
}

}  // namespace fp8scope::views
