// Coalescing redraw timer.
#include "models/redraw_scheduler.h"

#include <algorithm>
#include <ctime>

namespace fp8scope::views {

namespace {
// The UI thread's CPU time: what a refresh costs, not how long a loaded machine let it run.
qint64 thread_cpu_ms() {
    timespec t{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return static_cast<qint64>(t.tv_sec) * 1000 + t.tv_nsec / 1000000;
}
}  // namespace

RedrawScheduler::RedrawScheduler(int interval_ms, int data_interval_ms, QObject* parent)
    : QObject(parent), interval_ms_(interval_ms), data_interval_ms_(data_interval_ms) {
    timer_.setSingleShot(true);
    connect(&timer_, &QTimer::timeout, this, &RedrawScheduler::flush);
}

void RedrawScheduler::addClient(std::function<void()> refresh) { clients_.push_back(std::move(refresh)); }

int RedrawScheduler::delayFor(bool data, qint64 since_last_ms, qint64 last_cost_ms, int interval_ms, int data_interval_ms) {
    if (!data) return interval_ms;
    const qint64 gap = std::clamp<qint64>((kBusyShare - 1) * last_cost_ms, data_interval_ms, std::max(data_interval_ms, kMaxDataGapMs));
    return static_cast<int>(std::clamp<qint64>(gap - since_last_ms, interval_ms, gap));
}

void RedrawScheduler::schedule(bool data) {
    const qint64 since = since_last_.isValid() ? since_last_.elapsed() : (1ll << 40);
    const int delay = delayFor(data, since, last_cost_ms_, interval_ms_, data_interval_ms_);
    // A refresh already due sooner stays; a user's change brings a later one forward.
    if (!timer_.isActive() || timer_.remainingTime() > delay) timer_.start(delay);
}

void RedrawScheduler::markDirty() { schedule(false); }

void RedrawScheduler::markDataDirty() { schedule(true); }

void RedrawScheduler::flush() {
    timer_.stop();
    ++refreshes_;
    const qint64 start = thread_cpu_ms();
    for (auto& c : clients_) c();
    last_cost_ms_ = thread_cpu_ms() - start;
    since_last_.start();
}

}  // namespace fp8scope::views
