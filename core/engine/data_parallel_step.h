// A training step as one rank of a data-parallel job (engine/step_sync.h) over the job's
// DataParallel: the losses averaged over ranks before any decision, so all ranks take the
// same steps, rewinds and recipe switches; each run's gradients summed during its backward
// and waited for after it, the time split into this rank's compute and its communication;
// the step's records exchanged at its end with the in-flight health check; control
// requests agreed there too: rank 0's apply on every rank from the next step, a stop asked
// on any rank stops all, pause and resume are refused (a paused rank would stall the
// others). Only rank 0 writes checkpoints (in an elastic job that lost rank 0: the rank that
// became rank 0).
#pragma once

#include <chrono>
#include <functional>
#include <utility>

#include "engine/data_parallel.h"
#include "engine/step_sync.h"

namespace fp8scope {

class DataParallelStep final : public StepSync {
public:
    // `book`: the job's recipes (every rank's config is the same), what a switch may name.
    DataParallelStep(DataParallel& dp, RecipeBook book) : dp_(dp), book_(std::move(book)) {}

    int rank() const override { return dp_.rank(); }
    int world_size() const override { return dp_.world_size(); }
    void attach(Model& model) override;
    void grads_ready(Model& model, int stage) override { dp_.grads_ready(model, stage); }
    bool reduces_amaxes() const override { return true; }
    void begin_step(std::int64_t step) override;
    void begin_run() override;
    float loss(int run, float mine) override;
    void finish_backward(Model& model) override;
    std::vector<double> mean(const std::vector<double>& mine) override { return dp_.mean(mine); }
    StepAgreement agree(std::int64_t step, double step_ms, std::deque<ControlRequest> local) override;
    std::deque<ControlRequest> requests_due(std::deque<ControlRequest> local) override;
    // The rendezvous's rank 0: the job's world as the ranks last agreed on it, also when a
    // recovery failed before a new communicator was formed.
    bool writes_checkpoints() const override { return dp_.rendezvous().rank() == 0; }
    void hold_nonfinite(std::int64_t step) override {
        if (!nonfinite_step_) nonfinite_step_ = step;
    }
    std::optional<DType> grad_dtype() const override { return dp_.grad_dtype(); }
    void set_batch_rows(int rows) override;

    // Makes the job elastic (StepSync::change_world, admit): `recovering` runs as a
    // recovery begins (a watchdog stands down), `new_communicator` after the ranks agreed
    // on a new world, smaller or larger (the rendezvous is renumbered then): the
    // communicator to go on over, which must outlive the job; `join_failed` on rank 0 for
    // each rank (as launched) that could not join.
    struct Elastic {
        std::function<void()> recovering;
        std::function<Communicator&()> new_communicator;
        std::function<void(int)> join_failed;
    };
    void set_elastic(Elastic e) { elastic_ = std::move(e); }
    bool elastic() const override { return bool(elastic_.new_communicator); }
    WorldChange change_world(const std::exception& fault, std::int64_t failed_step,
                             const std::vector<std::int64_t>& snapshots) override;
    WorldJoin admit(const std::vector<int>& ranks, const std::function<std::string()>& state) override;

private:
    using clock = std::chrono::steady_clock;

    DataParallel& dp_;
    RecipeBook book_;
    clock::time_point run_start_;
    double compute_ms_ = 0, comm_ms_ = 0;  // this rank's share of the step
    float rank_loss_ = 0;                  // this rank's own loss of run 0
    std::int64_t nonfinite_step_ = 0;      // hold_nonfinite
    int runs_ = 0;                         // models attached: the runs a switch may name
    std::deque<ControlRequest> held_;      // made here, for the step's agreement
    std::deque<ControlRequest> agreed_;    // what every rank applies next
    Elastic elastic_;
    int batch_rows_ = 0;                   // set_batch_rows
};

}  // namespace fp8scope
