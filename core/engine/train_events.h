// What a training run reports while it runs: one record per step and run, and events.
// Observers are called on the training thread, between steps; they must not block long.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

#include "run_events.h"

namespace fp8scope {

struct StepRecord {
    std::int64_t step = 0;          // 1-based: the number of steps completed
    int run = 0;
    std::string recipe;
    std::uint64_t batch = 0;        // training batch index used by this step
    float loss = 0.0f;
    std::optional<float> eval_loss; // when this step ran an evaluation
    float lr = 0.0f;
    double grad_norm = 0.0;         // before clipping
    double step_time_s = 0.0;      // forward + backward + optimizer of this run
    double tokens_per_s = 0.0;
};

// One rank's share of a data-parallel step; every rank's reaches every rank each step (the
// in-flight health check), and rank 0's trace keeps them all.
struct RankStepRecord {
    std::int64_t step = 0;          // as StepRecord::step
    int rank = 0;
    double compute_ms = 0.0;        // forward + backward of every run until the device finished them
    double comm_ms = 0.0;           // then waiting for the gradient all-reduces to finish
    double step_ms = 0.0;           // the whole step on this rank
    float loss = 0.0f;              // this rank's own loss of run 0 (StepRecord::loss is the mean)
    double grad_bytes = 0.0;        // bytes this rank put into the gradient sums (all runs)
    double grad_error = std::numeric_limits<double>::quiet_NaN();  // relative L2 error of
                                    // compressed gradient sums, where measured (DataParallelOptions)
    std::int64_t nonfinite_step = 0;  // the step of this rank's first NaN/Inf (0: none yet)
    // FP8 sums against a BF16 shadow sum of the same sample, where measured
    // (engine/fp8_grad_sum_error.h); NaN otherwise.
    double grad_snr_db = std::numeric_limits<double>::quiet_NaN();
    double grad_underflow_pct = std::numeric_limits<double>::quiet_NaN();
    double grad_overflow_pct = std::numeric_limits<double>::quiet_NaN();
};

struct TrainEvent {
    EventKind kind = EventKind::Pause;
    std::int64_t step = 0;          // steps completed when it happened
    int run = -1;               // -1: the whole run
    std::string detail;             // e.g. "to step 50, skipping batch 57", a file name
};

class TrainObserver {
public:
    virtual ~TrainObserver() = default;
    // Before a step's forward passes; `capture` says whether GEMM operands are captured.
    virtual void on_step_begin(std::int64_t /*step*/, bool /*capture*/) {}
    virtual void on_step(const StepRecord& /*record*/) {}
    virtual void on_event(const TrainEvent& /*event*/) {}
    // Data-parallel runs: every rank's record of a step, after on_step of that step.
    virtual void on_rank_step(const RankStepRecord& /*record*/) {}
    // Before the step of on_step_begin: keep every kernel's record of `steps` steps from
    // it on (a live request, Trainer::record_kernels).
    virtual void on_kernel_request(std::int64_t /*steps*/) {}
};

}  // namespace fp8scope
