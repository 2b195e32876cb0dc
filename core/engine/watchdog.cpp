#include "engine/watchdog.h"

namespace fp8scope {

Watchdog::Watchdog(std::function<void(const std::string&)> on_expire)
    : on_expire_(std::move(on_expire)), thread_([this] { run(); }) {}

Watchdog::~Watchdog() {
    {
        std::lock_guard lock(mu_);
        stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
}

void Watchdog::arm(std::string phase, std::chrono::milliseconds limit) {
    {
        std::lock_guard lock(mu_);
        phase_ = std::move(phase);
        deadline_ = std::chrono::steady_clock::now() + limit;
        armed_ = true;
        ++generation_;
    }
    cv_.notify_all();
}

void Watchdog::disarm() {
    {
        std::lock_guard lock(mu_);
        armed_ = false;
        ++generation_;
    }
    cv_.notify_all();
}

void Watchdog::run() {
    std::unique_lock lock(mu_);
    while (!stop_) {
        if (!armed_) {
            cv_.wait(lock);
            continue;
        }
        const std::uint64_t gen = generation_;
        if (cv_.wait_until(lock, deadline_, [&] { return stop_ || generation_ != gen; })) continue;
        armed_ = false;  // expired: once per arm()
        const std::string phase = phase_;
        lock.unlock();
        on_expire_(phase);
        lock.lock();
    }
}

}  // namespace fp8scope
