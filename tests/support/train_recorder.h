// A TrainObserver that keeps everything a Trainer reports (its step records, every rank's
// records of a data-parallel step, its events), for tests that check them once the run is
// over or, through the counting helpers, while it runs on another thread.
#pragma once

#include <mutex>
#include <string>
#include <vector>

#include "engine/train_events.h"

namespace fp8scope::testing {

struct Recorder : TrainObserver {
    mutable std::mutex mu;  // the trainer's thread appends while a test may count
    std::vector<StepRecord> steps;
    std::vector<RankStepRecord> ranks;  // a data-parallel job: every rank's, step by step
    std::vector<TrainEvent> events;

    void on_step(const StepRecord& r) override {
        std::lock_guard lock(mu);
        steps.push_back(r);
    }
    void on_rank_step(const RankStepRecord& r) override {
        std::lock_guard lock(mu);
        ranks.push_back(r);
    }
    void on_event(const TrainEvent& e) override {
        std::lock_guard lock(mu);
        events.push_back(e);
    }

    // The losses of lock-step run `run`, step by step.
    std::vector<float> losses(int run = 0) const {
        std::lock_guard lock(mu);
        std::vector<float> out;
        for (const StepRecord& s : steps)
            if (s.run == run) out.push_back(s.loss);
        return out;
    }
    int count(EventKind kind) const { return int(details(kind).size()); }
    // The details of the events of `kind`, in order.
    std::vector<std::string> details(EventKind kind) const {
        std::lock_guard lock(mu);
        std::vector<std::string> out;
        for (const TrainEvent& e : events)
            if (e.kind == kind) out.push_back(e.detail);
        return out;
    }
};

}  // namespace fp8scope::testing
