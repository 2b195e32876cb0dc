// Coalescing redraw timer.
#include "models/redraw_scheduler.h"

namespace fp8scope::views {

RedrawScheduler::RedrawScheduler(int interval_ms, QObject* parent) : QObject(parent) {
    timer_.setSingleShot(true);
    timer_.setInterval(interval_ms);
    connect(&timer_, &QTimer::timeout, this, &RedrawScheduler::flush);
}

void RedrawScheduler::addClient(std::function<void()> refresh) { clients_.push_back(std::move(refresh)); }

void RedrawScheduler::markDirty() {
    if (!timer_.isActive()) timer_.start();
}

void RedrawScheduler::flush() {
    timer_.stop();
    ++refreshes_;
    for (auto& c : clients_) c();
}

}  // namespace fp8scope::views
