// Where a training step meets the other ranks of its job. The trainer calls each of these
// at its place in every step, whatever the job: a single process (SingleProcess) meets
// nobody and changes nothing; a rank of a data-parallel job (DataParallelStep,
// engine/data_parallel_step.h) sums gradients, averages losses and agrees with the others
// on each step's records and control requests. Rewinds need no exchange of their own:
// every rank decides them on the agreed losses and the summed gradients' norm. Recovery
// from a lost rank (the survivors agree on a new world, form a new communicator, restore
// a snapshot and go on) belongs behind this interface too.
#pragma once

#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "backend/tensor_desc.h"
#include "engine/control_request.h"
#include "engine/train_events.h"

namespace fp8scope {

class Model;

// What the ranks agreed at the end of a step.
struct StepAgreement {
    std::vector<std::string> refused;   // this rank's requests the job does not take (Error events)
    std::vector<RankStepRecord> ranks;  // every rank's record of the step, in rank order
    std::vector<std::string> health;    // in-flight health findings (Health events)
    // Tensors whose delayed-scaling state started to differ across ranks (ScalingMismatch
    // events; engine/data_parallel_state_check.h).
    std::vector<std::string> scaling;
};

// An elastic job's new world after it lost ranks (StepSync::change_world).
struct WorldChange {
    std::vector<int> lost;            // the lost ranks, as launched
    int old_world = 0, new_world = 0;
    std::int64_t failed_step = 0;     // the latest step a survivor was in when the rank was lost
    std::int64_t restore_step = 0;    // the latest rewind snapshot every survivor holds
    std::string why;                  // how the loss showed (the failed exchange)
};

// An elastic job's world after ranks joined it at a step boundary (StepSync::admit).
struct WorldJoin {
    std::vector<int> joined;                          // as launched
    std::vector<std::pair<int, std::string>> failed;  // as launched, and why
    int old_world = 0, new_world = 0;
};

class StepSync {
public:
    virtual ~StepSync() = default;

    virtual int rank() const = 0;
    virtual int world_size() const = 0;  // each batch is world_size() times config.batch_size rows

    // Wires `model` (which outlives this) before training: its backward calls
    // grads_ready() and its delayed scaling pushes amaxes as reduces_amaxes() says.
    virtual void attach(Model& model) = 0;
    // From Model::backward, each time a stage's gradients are final (ParamTensor::stage).
    virtual void grads_ready(Model& model, int stage) = 0;
    // Delayed scaling's amaxes wait for finish_backward() instead of being pushed at once.
    virtual bool reduces_amaxes() const = 0;

    // A step, in this order: begin_step; per run begin_run, loss, finish_backward; mean
    // (evaluation steps); agree.
    virtual void begin_step(std::int64_t step) = 0;  // 1-based
    virtual void begin_run() = 0;                    // before a run's forward
    // The loss every rank decides on (rewinds, records), given this rank's loss of `run`.
    virtual float loss(int run, float mine) = 0;
    // After model.backward(): the gradients and amaxes the optimizer is to see.
    virtual void finish_backward(Model& model) = 0;
    // The values every rank records (eval losses), given this rank's.
    virtual std::vector<double> mean(const std::vector<double>& mine) = 0;
    // The end of step `step` (`step_ms` long on this rank); `local`: the control requests
    // made on this process since the last call here or to requests_due().
    virtual StepAgreement agree(std::int64_t step, double step_ms, std::deque<ControlRequest> local) = 0;

    // Between steps, given the requests made on this process since the last call here or
    // to agree(): the requests to apply now.
    virtual std::deque<ControlRequest> requests_due(std::deque<ControlRequest> local) = 0;
    // This rank's first NaN/Inf was at `step`: it goes with every agreement from now on
    // (RankStepRecord::nonfinite_step), so the job knows which rank held the first.
    virtual void hold_nonfinite(std::int64_t /*step*/) {}
    // Whether this process writes the job's checkpoints.
    virtual bool writes_checkpoints() const = 0;
    // The type gradient sums travel in between ranks; none in a job of one.
    virtual std::optional<DType> grad_dtype() const = 0;

    // The rows of the job's whole batch, which each rank's batch is its share of
    // (BatchSampler::set_shard): from the trainer at the start and after a change of world.
    virtual void set_batch_rows(int /*rows*/) {}
    // Elastic jobs (data_parallel.elastic) go on without a lost rank: after a step failed
    // with `fault` in an exchange (at `failed_step`, this rank's rewind snapshots being of
    // `snapshots`), the survivors agree on the new world and go on over a new
    // communicator; the trainer then restores the snapshot of restore_step. Throws when
    // the job cannot go on (rank 0 lost and no majority met again at a new hub, no rank
    // lost, no snapshot every survivor holds, or a second failure during the recovery).
    virtual bool elastic() const { return false; }
    virtual WorldChange change_world(const std::exception& fault, std::int64_t failed_step,
                                     const std::vector<std::int64_t>& snapshots);
    // Elastic jobs, at a step boundary, every rank with the `ranks` of rank 0's Admit
    // request: rank 0 sends each rank waiting to join `state()` (the job's state as a
    // checkpoint holds it); those that took it join, and the job goes on over a new
    // communicator with the batch split over them. A joiner that failed is left out and the
    // job is as it was. Throws as change_world's cause does when a rank of the job is lost
    // meanwhile.
    virtual WorldJoin admit(const std::vector<int>& ranks, const std::function<std::string()>& state);
};

// A job of one: requests apply as they come, nothing is exchanged.
class SingleProcess final : public StepSync {
public:
    int rank() const override { return 0; }
    int world_size() const override { return 1; }
    void attach(Model& model) override;
    void grads_ready(Model&, int) override {}
    bool reduces_amaxes() const override { return false; }
    void begin_step(std::int64_t) override {}
    void begin_run() override {}
    float loss(int, float mine) override { return mine; }
    void finish_backward(Model&) override {}
    std::vector<double> mean(const std::vector<double>& mine) override { return mine; }
    StepAgreement agree(std::int64_t step, double step_ms, std::deque<ControlRequest> local) override;
    std::deque<ControlRequest> requests_due(std::deque<ControlRequest> local) override;
    bool writes_checkpoints() const override { return true; }
    std::optional<DType> grad_dtype() const override { return std::nullopt; }

private:
    std::deque<ControlRequest> held_;  // taken at a step's end, applied before the next
};

}  // namespace fp8scope
