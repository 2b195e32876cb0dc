// Trace file loading on a worker thread. Records go to the store in batches of about
// kBatchSteps steps so the first plots appear while a large trace is still being read.
#include "trace_file_loader.h"

#include <QElapsedTimer>
#include <QPointer>

#include "display_names.h"
#include "trace_reader.h"

namespace fp8scope::views {

namespace {
constexpr std::int64_t kBatchSteps = 20000;
}

TraceFileLoader::TraceFileLoader(SeriesStore* store, QObject* parent) : QObject(parent), store_(store) {
    pool_.setMaxThreadCount(1);
}

TraceFileLoader::~TraceFileLoader() {
    store_->clear();  // a running load sees a new generation and stops
    pool_.waitForDone();
}

void TraceFileLoader::open(const QString& path) {
    ++busy_;
    pool_.start([this, path] {
        load(path);
        --busy_;
    });
}

bool TraceFileLoader::wait(int timeout_ms) { return pool_.waitForDone(timeout_ms); }

void TraceFileLoader::load(const QString& path) {
    QElapsedTimer clock;
    clock.start();
    QPointer<TraceFileLoader> self(this);
    auto notify = [self](auto&& f) { QMetaObject::invokeMethod(self, std::forward<decltype(f)>(f), Qt::QueuedConnection); };
#ifndef FP8SCOPE_HAVE_READER
    const QString msg = QStringLiteral("%1: this build cannot read trace files (no trace reader)").arg(path);
    notify([self, path, msg] { if (self) emit self->failed(path, msg); });
#else
    try {
        trace::TraceReader reader(path.toStdString());
        const trace::TraceMeta meta = reader.meta();
        const std::uint64_t gen = store_->reset(meta);
        notify([self, path] { if (self) emit self->opened(path); });
        auto push = [&](TraceBatch&& b) {
            if (!store_->append(gen, std::move(b))) throw std::runtime_error("");  // superseded
        };
        TraceBatch head;
        head.events = reader.events();
        push(std::move(head));
        for (int run = 0; run < static_cast<int>(meta.runs.size()); ++run) {
            TraceBatch steps;
            steps.steps = reader.steps(run);
            push(std::move(steps));
            const std::int64_t last = reader.last_step(run);
            for (std::int64_t from = 0; from <= last; from += kBatchSteps) {
                TraceBatch b;
                b.scaling = reader.scaling(run, from, from + kBatchSteps - 1);
                b.ops = reader.ops(run, from, from + kBatchSteps - 1);
                push(std::move(b));
            }
            for (std::int64_t step : reader.capture_steps(run)) {
                TraceBatch b;
                b.operands = reader.operands(run, step);
                push(std::move(b));
            }
            const auto refs = all_operands(static_cast<int>(meta.linears.size()));
            for (std::int64_t step : reader.blockmap_steps(run)) {
                TraceBatch b;
                for (const OperandRef& r : refs) {
                    auto maps = reader.blockmaps({run, step, r.linear, r.gemm, r.operand});
                    for (auto& m : maps) b.blockmaps.push_back(std::move(m));
                }
                push(std::move(b));
            }
        }
        const qint64 ms = clock.elapsed();
        notify([self, path, ms] { if (self) emit self->finished(path, ms); });
    } catch (const trace::TraceError& e) {
        const QString msg = QString::fromStdString(e.what());
        store_->clear();
        notify([self, path, msg] { if (self) emit self->failed(path, msg); });
    } catch (const std::exception& e) {
        if (*e.what() == '\0') return;  // superseded by a newer load
        const QString msg = QStringLiteral("%1: %2").arg(path, QString::fromStdString(e.what()));
        store_->clear();
        notify([self, path, msg] { if (self) emit self->failed(path, msg); });
    }
#endif
}

}  // namespace fp8scope::views
