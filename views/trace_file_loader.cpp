// Trace file loading on a worker thread. Records go to the store in batches of about
// kBatchSteps steps so the first plots appear while a large trace is still being read.
//
// Reading is incremental per run: everything up to the newest step record is read, and
// that step is the run's watermark; a poll reads only what lies past it. Step records are
// written after their step's scaling, operands and ops, so what a step record covers is
// complete. A step record at or before the watermark is a rewind: the watermark goes
// back and the store drops the abandoned steps as the re-recorded ones arrive.
#include "trace_file_loader.h"

#include <QElapsedTimer>
#include <QPointer>
#include <algorithm>
#include <limits>

#include "display_names.h"
#include "trace_reader.h"

namespace fp8scope::views {

namespace {
constexpr std::int64_t kBatchSteps = 20000;

struct Superseded {};  // the store moved on to a newer source
}  // namespace

struct TraceFileLoader::Open {
    QString path;
    std::unique_ptr<trace::TraceReader> reader;
    std::uint64_t generation = 0;
    std::vector<std::size_t> steps_read;  // step records consumed, per run
    std::vector<std::int64_t> done;       // watermark step, per run
    std::size_t events_read = 0, ops_known = 0;
};

struct TraceFileLoader::Pending {
    QString path;
    QElapsedTimer clock;
    int timeout_ms = 0;
};

TraceFileLoader::TraceFileLoader(SeriesStore* store, QObject* parent) : QObject(parent), store_(store) {
    pool_.setMaxThreadCount(1);
    connect(&poll_, &QTimer::timeout, this, &TraceFileLoader::poll);
}

TraceFileLoader::~TraceFileLoader() {
    poll_.stop();
    store_->clear();  // a running load sees a new generation and stops
    pool_.waitForDone();
}

void TraceFileLoader::open(const QString& path) {
    ++busy_;
    pool_.start([this, path] {
        pending_.reset();
        load(path);
        --busy_;
    });
}

void TraceFileLoader::openGrowing(const QString& path, int timeout_ms) {
    ++busy_;
    pool_.start([this, path, timeout_ms] {
        pending_ = std::make_shared<Pending>();
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
    pool_.start([this] { open_.reset(); });
}

void TraceFileLoader::setFollowing(bool on, int interval_ms) {
    if (on) poll_.start(interval_ms);
    else poll_.stop();
}

void TraceFileLoader::poll() {
    if (busy()) return;  // the previous read is still going; the next tick catches up
    ++busy_;
    pool_.start([this] {
        if (!open_ && pending_) tryPending();
        if (open_) {
            try {
                if (open_->reader->refresh()) readNew(*open_, true);
            } catch (const Superseded&) {
                open_.reset();
            } catch (const std::exception& e) {
                const QString path = open_->path;
                open_.reset();
                fail(path, QString::fromStdString(e.what()));
            }
        }
        --busy_;
    });
}

bool TraceFileLoader::wait(int timeout_ms) { return pool_.waitForDone(timeout_ms); }

void TraceFileLoader::fail(const QString& path, const QString& message) {
    QPointer<TraceFileLoader> self(this);
    QMetaObject::invokeMethod(
        this, [self, path, message] { if (self) emit self->failed(path, message); }, Qt::QueuedConnection);
}

bool TraceFileLoader::load(const QString& path, bool quiet) {
    QElapsedTimer clock;
    clock.start();
    QPointer<TraceFileLoader> self(this);
    open_.reset();
    try {
        auto o = std::make_shared<Open>();
        o->path = path;
        o->reader = std::make_unique<trace::TraceReader>(path.toStdString());
        const trace::TraceMeta& meta = o->reader->meta();
        o->steps_read.assign(meta.runs.size(), 0);
        o->done.assign(meta.runs.size(), -1);
        o->ops_known = meta.ops.size();
        o->generation = store_->reset(meta);
        QMetaObject::invokeMethod(this, [self, path] { if (self) emit self->opened(path); }, Qt::QueuedConnection);
        readNew(*o, false);
        open_ = std::move(o);
        const qint64 ms = clock.elapsed();
        QMetaObject::invokeMethod(
            this, [self, path, ms] { if (self) emit self->finished(path, ms); }, Qt::QueuedConnection);
        return true;
    } catch (const Superseded&) {
        return true;  // a newer source took over: nothing to retry
    } catch (const trace::TraceError& e) {
        store_->clear();
        if (!quiet) fail(path, QString::fromStdString(e.what()));
    } catch (const std::exception& e) {
        store_->clear();
        if (!quiet) fail(path, QStringLiteral("%1: %2").arg(path, QString::fromStdString(e.what())));
    }
    return false;
}

void TraceFileLoader::readNew(Open& o, bool notify_growth) {
    const trace::TraceReader& reader = *o.reader;
    const trace::TraceMeta& meta = reader.meta();
    auto push = [&](TraceBatch&& b) {
        if (!b.empty() && !store_->append(o.generation, std::move(b))) throw Superseded{};
    };
    TraceBatch head;
    for (std::size_t id = o.ops_known; id < meta.ops.size(); ++id)
        head.op_names.push_back({static_cast<std::int32_t>(id), meta.ops[id]});
    o.ops_known = meta.ops.size();
    auto events = reader.events();
    if (events.size() > o.events_read)
        head.events.assign(events.begin() + static_cast<std::ptrdiff_t>(o.events_read), events.end());
    o.events_read = std::max(o.events_read, events.size());
    push(std::move(head));

    const auto refs = all_operands(static_cast<int>(meta.linears.size()));
    std::int64_t newest = -1;
    for (int run = 0; run < static_cast<int>(meta.runs.size()); ++run) {
        auto all = reader.steps(run);
        if (all.size() <= o.steps_read[run]) continue;
        TraceBatch steps;
        steps.steps.assign(all.begin() + static_cast<std::ptrdiff_t>(o.steps_read[run]), all.end());
        o.steps_read[run] = all.size();
        std::int64_t first = std::numeric_limits<std::int64_t>::max(), limit = -1;
        for (const auto& s : steps.steps) {
            first = std::min(first, s.step);
            limit = s.step;  // the newest record says where the run is now
        }
        std::int64_t& done = o.done[run];
        if (first <= done) done = first - 1;  // a rewind: re-read from there
        push(std::move(steps));
        for (std::int64_t from = done + 1; from <= limit; from += kBatchSteps) {
            const std::int64_t to = std::min(limit, from + kBatchSteps - 1);
            TraceBatch b;
            b.scaling = reader.scaling(run, from, to);
            b.ops = reader.ops(run, from, to);
            push(std::move(b));
        }
        for (std::int64_t step : reader.capture_steps(run)) {
            if (step <= done || step > limit) continue;
            TraceBatch b;
            b.operands = reader.operands(run, step);
            push(std::move(b));
        }
        for (std::int64_t step : reader.blockmap_steps(run)) {
            if (step <= done || step > limit) continue;
            TraceBatch b;
            for (const OperandRef& r : refs)
                for (auto& m : reader.blockmaps({run, step, r.linear, r.gemm, r.operand})) b.blockmaps.push_back(std::move(m));
            push(std::move(b));
        }
        done = limit;
        newest = std::max(newest, limit);
    }
    if (notify_growth && newest >= 0) {
        QPointer<TraceFileLoader> self(this);
        const QString path = o.path;
        QMetaObject::invokeMethod(
            this, [self, path, newest] { if (self) emit self->grew(path, newest); }, Qt::QueuedConnection);
    }
}

}  // namespace fp8scope::views
