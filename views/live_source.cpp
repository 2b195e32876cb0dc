// Live records to the store. The client's handlers run on its reader thread and only
// append to a pending batch under a mutex; the UI thread's flush timer moves that batch
// to the store, so the store takes one lock per tick however fast the engine streams.
#include "live_source.h"

#include <QPointer>

#include "live_client.h"

namespace fp8scope::views {

namespace {
constexpr int kFlushMs = 50;
}

struct LiveSource::Pending {
    std::mutex mutex;
    bool has_meta = false;
    trace::TraceMeta meta;
    TraceBatch batch;
    std::uint64_t generation = 0;
};

LiveSource::LiveSource(SeriesStore* store, QObject* parent) : QObject(parent), store_(store) {
    pool_.setMaxThreadCount(2);  // a connect and a command may overlap
    connect(&flush_, &QTimer::timeout, this, &LiveSource::flush);
}

LiveSource::~LiveSource() {
    detach();
    pool_.waitForDone();
}

void LiveSource::attach(const QString& endpoint, const QString& token) {
    detach();
    endpoint_ = endpoint;
    auto pending = std::make_shared<Pending>();
    pending_ = pending;
    QPointer<LiveSource> self(this);
    pool_.start([this, self, pending, endpoint, token] {
        live::ClientHandlers h;
        auto add = [pending](auto&& fill) {
            std::lock_guard lock(pending->mutex);
            fill(pending->batch);
        };
        h.on_meta = [pending](const trace::TraceMeta& m) {
            std::lock_guard lock(pending->mutex);
            pending->meta = m;
            pending->has_meta = true;
        };
        h.on_step = [add](const trace::StepRecord& r) { add([&](TraceBatch& b) { b.steps.push_back(r); }); };
        h.on_event = [add](const trace::EventRecord& r) { add([&](TraceBatch& b) { b.events.push_back(r); }); };
        h.on_scaling = [add](const trace::ScalingRecord& r) { add([&](TraceBatch& b) { b.scaling.push_back(r); }); };
        h.on_operand = [add](const trace::OperandRecord& r) { add([&](TraceBatch& b) { b.operands.push_back(r); }); };
        h.on_blockmap = [add](const trace::BlockMapRecord& r) { add([&](TraceBatch& b) { b.blockmaps.push_back(r); }); };
        h.on_op = [add](const trace::OpRecord& r) { add([&](TraceBatch& b) { b.ops.push_back(r); }); };
        // A kernel name that appeared after the meta: the store adds it to the run's op table.
        h.on_op_name = [add](const trace::OpNameRecord& r) { add([&](TraceBatch& b) { b.op_names.push_back(r); }); };
        h.on_closed = [self](const std::string& why) {
            const QString msg = QString::fromStdString(why);
            QMetaObject::invokeMethod(self, [self, msg] {
                if (!self) return;
                self->flush();
                self->attached_ = false;
                self->flush_.stop();
                emit self->closed(msg);
            }, Qt::QueuedConnection);
        };
        try {
            auto client = std::make_shared<live::LiveClient>(live::parse_endpoint(endpoint.toStdString()),
                                                             token.toStdString(), std::move(h));
            {
                std::lock_guard lock(client_mutex_);
                if (pending_ != pending) return;  // detached or re-attached meanwhile
                client_ = client;
            }
            attached_ = true;
            QMetaObject::invokeMethod(self, [self, endpoint] {
                if (!self) return;
                self->flush_.start(kFlushMs);
                emit self->attached(endpoint);
            }, Qt::QueuedConnection);
        } catch (const std::exception& e) {
            const QString msg = QStringLiteral("%1: %2").arg(endpoint, QString::fromStdString(e.what()));
            QMetaObject::invokeMethod(self, [self, msg] { if (self) emit self->failed(msg); }, Qt::QueuedConnection);
        }
    });
}

void LiveSource::detach() {
    flush_.stop();
    std::shared_ptr<live::LiveClient> client;
    {
        std::lock_guard lock(client_mutex_);
        client = std::move(client_);
        pending_.reset();
    }
    attached_ = false;
    if (client) client->close();
}

void LiveSource::flush() {
    auto pending = pending_;
    if (!pending) return;
    TraceBatch batch;
    {
        std::lock_guard lock(pending->mutex);
        if (pending->has_meta) {
            // The engine's metadata starts a new trace in the store, as opening a file does.
            pending->generation = store_->reset(std::move(pending->meta));
            pending->has_meta = false;
        }
        if (pending->generation == 0) return;
        std::swap(batch, pending->batch);
    }
    if (!batch.empty() && !store_->append(pending->generation, std::move(batch))) detach();  // another source took over
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
    QPointer<LiveSource> self(this);
    pool_.start([self, client, command, what] {
        live::CommandReply r;
        try {
            r = client->send(command);
        } catch (const std::exception& e) {
            r = {false, e.what()};
        }
        const QString error = QString::fromStdString(r.error);
        QMetaObject::invokeMethod(self, [self, what, r, error] {
            if (self) emit self->replied(what, r.ok, error);
        }, Qt::QueuedConnection);
    });
}

}  // namespace fp8scope::views
