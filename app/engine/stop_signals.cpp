// The signal handlers only set a flag (all a handler may safely do); the watcher thread
// polls it every 50 ms and asks the trainer to stop.
#include "stop_signals.h"

#include <chrono>
#include <csignal>

#include "engine/trainer.h"

namespace fp8scope::cli {
namespace {

volatile std::sig_atomic_t g_signalled = 0;

extern "C" void on_stop_signal(int sig) {
    g_signalled = 1;
    std::signal(sig, SIG_DFL);  // the next one of this kind kills
}

}  // namespace

StopOnSignals::StopOnSignals(Trainer& trainer) {
    g_signalled = 0;
    std::signal(SIGINT, on_stop_signal);
    std::signal(SIGTERM, on_stop_signal);
    watcher_ = std::thread([this, &trainer] {
        while (!done_) {
            if (g_signalled) {
                trainer.stop();
                return;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
    });
}

StopOnSignals::~StopOnSignals() {
    std::signal(SIGINT, SIG_DFL);
    std::signal(SIGTERM, SIG_DFL);
    done_ = true;
    watcher_.join();
}

}  // namespace fp8scope::cli
