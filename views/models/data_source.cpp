// The store side every source shares: its generation, the stale-batch check, and how a
// worker's news reaches the UI thread.
#include "models/data_source.h"

#include <QPointer>

namespace fp8scope::views {

DataSource::DataSource(SeriesStore* store, int worker_threads, QObject* parent)
    : QObject(parent), store_(store) {
    workers_.setMaxThreadCount(worker_threads);
}

void DataSource::shutdown() {
    end();  // a running job stops at its next batch
    workers_.waitForDone();
}

void DataSource::begin(trace::TraceMeta meta, std::vector<RankRun> rank_runs) {
    generation_ = store_->reset(std::move(meta), std::move(rank_runs));
}

bool DataSource::deliver(TraceBatch batch) {
    if (batch.empty()) return true;
    const std::uint64_t generation = generation_.load();
    // The store checks the generation under its lock, so a reset between the two loads wins.
    return generation != 0 && store_->append(generation, std::move(batch));
}

void DataSource::post(std::function<void()> f) {
    QPointer<DataSource> self(this);
    QMetaObject::invokeMethod(this, [self, f = std::move(f)] { if (self) f(); }, Qt::QueuedConnection);
}

}  // namespace fp8scope::views
