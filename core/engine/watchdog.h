// A watchdog for phases that can hang: a collective whose peer died or stalls, a
// rendezvous, a checkpoint on a dead file system. arm() starts a phase with a time limit;
// if it is not disarmed (or re-armed) in time, on_expire runs once, on the watchdog's
// own thread, with the phase's name, so the job can abort its communicator and end with a
// message instead of hanging for ever.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace fp8scope {

class Watchdog {
public:
    explicit Watchdog(std::function<void(const std::string& phase)> on_expire);
    ~Watchdog();
    Watchdog(const Watchdog&) = delete;
    Watchdog& operator=(const Watchdog&) = delete;

    void arm(std::string phase, std::chrono::milliseconds limit);
    void disarm();

private:
    void run();

    std::function<void(const std::string&)> on_expire_;
    std::mutex mu_;
    std::condition_variable cv_;
    std::string phase_;
    std::chrono::steady_clock::time_point deadline_;
    std::uint64_t generation_ = 0;  // which arm() the deadline belongs to
    bool armed_ = false, stop_ = false;
    std::thread thread_;
};

}  // namespace fp8scope
