// The progress display of `fp8scope-engine train` on stderr: a bar redrawn in place on a
// terminal, plain lines every log_every steps otherwise (logs, CI). Events get a line each.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "engine/train_events.h"

namespace fp8scope::cli {

class TrainProgress : public TrainObserver {
public:
    TrainProgress(std::int64_t total_steps, int runs, int log_every, std::int64_t first_step, bool quiet);
    void on_step(const StepRecord& record) override;
    void on_event(const TrainEvent& event) override;
    void finish();  // ends the bar's line

private:
    void draw(const StepRecord& last);

    std::int64_t total_, first_;
    int runs_, log_every_;
    bool quiet_, tty_;
    bool bar_open_ = false;
    std::vector<float> loss_, eval_;
    std::chrono::steady_clock::time_point start_;
    double tokens_per_step_ = 0.0;
};

}  // namespace fp8scope::cli
