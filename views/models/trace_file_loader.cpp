// Trace file loading on a worker thread: the jobs (open, wait for a growing file, poll),
// and what each tells the UI. The reading itself is OpenTrace's.
#include "models/trace_file_loader.h"

#include <QElapsedTimer>

#include "models/open_trace.h"
#include "trace_reader.h"

namespace fp8scope::views {

namespace {
struct Superseded {};  // the store moved on to a newer source
}  // namespace

struct TraceFileLoader::Pending {
    QString path;
    QElapsedTimer clock;
    int timeout_ms = 0;
};

TraceFileLoader::TraceFileLoader(SeriesStore* store, QObject* parent) : DataSource(store, 1, parent) {
    connect(&poll_, &QTimer::timeout, this, &TraceFileLoader::poll);
}

TraceFileLoader::~TraceFileLoader() {
    poll_.stop();
    shutdown();
}

void TraceFileLoader::open(const QString& path) {
    ++busy_;
    workers().start([this, path] {
        pending_.reset();
        load(path);
        --busy_;
    });
}

void TraceFileLoader::openGrowing(const QString& path, int timeout_ms) {
    ++busy_;
    workers().start([this, path, timeout_ms] {
        pending_ = std::make_unique<Pending>();
        pending_->path = path;
        pending_->timeout_ms = timeout_ms;
        pending_->clock.start();
        tryPending();
        --busy_;
    });
    setFollowing(true);
}

void TraceFileLoader::tryPending() {
    const bool last_try = pending_->clock.elapsed() >= pending_->timeout_ms;
    if (load(pending_->path, !last_try) || last_try) pending_.reset();
}

void TraceFileLoader::close() {
    poll_.stop();
    end();
    workers().start([this] {
        open_.reset();
        pending_.reset();
    });
}

void TraceFileLoader::setFollowing(bool on, int interval_ms) {
    if (on) poll_.start(interval_ms);
    else poll_.stop();
}

void TraceFileLoader::poll() {
    if (busy()) return;  // the previous read is still going; the next tick catches up
    ++busy_;
    workers().start([this] {
        if (!open_ && pending_) tryPending();
        if (open_) {
            try {
                if (open_->refresh()) {
                    const qint64 newest = readNew();
                    const QString path = open_path_;
                    if (newest >= 0) post([this, path, newest] { emit grew(path, newest); });
                }
            } catch (const Superseded&) {
                open_.reset();
            } catch (const std::exception& e) {
                open_.reset();
                fail(open_path_, QString::fromStdString(e.what()));
            }
        }
        --busy_;
    });
}

void TraceFileLoader::fail(const QString& path, const QString& message) {
    post([this, path, message] { emit failed(path, message); });
}

std::int64_t TraceFileLoader::readNew() {
    return open_->readNew([this](TraceBatch&& b) {
        if (!deliver(std::move(b))) throw Superseded{};
    });
}

bool TraceFileLoader::load(const QString& path, bool quiet) {
    QElapsedTimer clock;
    clock.start();
    open_.reset();
    try {
        open_ = std::make_unique<OpenTrace>(path.toStdString());
        open_path_ = path;
        begin(open_->meta());
        post([this, path] { emit opened(path); });
        readNew();
        const qint64 ms = clock.elapsed();
        post([this, path, ms] { emit finished(path, ms); });
        return true;
    } catch (const Superseded&) {
        open_.reset();
        return true;  // a newer source took over: nothing to retry
    } catch (const trace::TraceError& e) {
        open_.reset();
        store()->clear();
        if (!quiet) fail(path, QString::fromStdString(e.what()));
    } catch (const std::exception& e) {
        open_.reset();
        store()->clear();
        if (!quiet) fail(path, QStringLiteral("%1: %2").arg(path, QString::fromStdString(e.what())));
    }
    return false;
}

}  // namespace fp8scope::views
