// Ctrl-C (SIGINT) and SIGTERM stop a training run between steps, so it ends the way a
// finished run does: the final checkpoint, the trace's End event, the live socket file
// removed. A second signal of either kind kills at once.
#pragma once

#include <atomic>
#include <thread>

namespace fp8scope {
class Trainer;
}

namespace fp8scope::cli {

class StopOnSignals {
public:
    // Installs the handlers; a watcher thread turns a signal into trainer.stop(), which
    // also reaches a paused run (the training thread then waits for requests, not steps).
    explicit StopOnSignals(Trainer& trainer);
    ~StopOnSignals();  // restores the default handlers
    StopOnSignals(const StopOnSignals&) = delete;
    StopOnSignals& operator=(const StopOnSignals&) = delete;

private:
    std::atomic<bool> done_{false};
    std::thread watcher_;
};

}  // namespace fp8scope::cli
