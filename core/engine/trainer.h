// The training loop. One Trainer runs one or several runs (one Model and AdamW each)
// in lock step: the same initial weights, the same batches, each with its own training
// recipe, so their losses differ only by the recipe. With config.seeds > 1 every recipe
// runs once per seed; the runs of one seed share initial weights and batches (paired), the
// seeds differ in both.
//
// Control from other threads (the live view, a signal handler) goes through requests
// (pause, resume, stop, switch a run's recipe, checkpoint now) that the training
// thread applies between steps. Observers receive per-step records and events.
//
// Recovery: the last good state is kept (every rewind.snapshot_every steps and after every
// recipe switch), its parameters and AdamW moments in backend memory, so a GPU copies them
// within its own memory in milliseconds instead of through the host in seconds. A NaN/Inf loss or gradient norm, or a loss above
// rewind.spike_factor times the moving average of the last rewind.window losses, restores
// it for every run (lock step is kept), skips the offending batch for good and goes on.
//
// On a backend with lanes (RunLanes: CUDA) the runs of a step go at once, one thread and
// one stream each (config.concurrent_runs, on by default), unless the step captures GEMM
// operands or the trainer is a rank of a data-parallel job; each run issues the same work
// in the same order, so results are bit for bit those of the runs one after another, and
// the observers and capture sinks hear of the runs in run order after the step.
//
// Every step meets the other ranks of its job at fixed points (engine/step_sync.h): a
// single process by default, one rank of a data-parallel job with DataParallelStep
// (engine/data_parallel_step.h), where each rank runs a Trainer on its rows of each batch
// (config.batch_size is per rank) and the ranks agree on losses, control requests and
// which of them writes checkpoints.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "engine/capture_sink.h"
#include "engine/checkpoint.h"
#include "engine/checkpoint_writer.h"
#include "engine/data.h"
#include "engine/model.h"
#include "engine/nonfinite_watch.h"
#include "engine/optimizer.h"
#include "engine/schedule.h"
#include "engine/step_sync.h"
#include "engine/train_config.h"
#include "engine/train_events.h"

namespace fp8scope {

class ThreadPool;

struct RunSummary {
    std::string recipe;
    float loss = 0.0f;                  // last training loss
    std::optional<float> eval_loss;     // last eval loss
};

struct TrainSummary {
    std::int64_t steps = 0;             // steps completed
    std::vector<RunSummary> runs;
    std::int64_t rewinds = 0;
    bool stopped = false;               // ended by stop() before config.steps
    std::string error;                  // non-empty: training gave up (NaN without rewind, ...)
                                        // or a checkpoint failed to write or read back
    // The first NaN/Inf of the runs (lowest step, then run); in a data-parallel job this
    // rank's, and first_nonfinite_rank the rank that held the job's first (lowest step,
    // then rank; -1: none).
    std::optional<NonFiniteRecord> first_nonfinite;
    int first_nonfinite_rank = -1;
};

class Trainer {
public:
    // Loads the data, builds and initialises the runs from their seeds (config.run_seed:
    // identical weights for one seed) or all from config.init_from's weights, or restores
    // config.checkpoint.resume. Throws on bad data or checkpoints.
    // Every run runs on `backend` (which must be the config's device); every step meets the
    // job's other ranks through `sync` (which must outlive this; null: a single process).
    // `joined`: the state of the elastic job this rank joined late (StepSync::admit), taken
    // as a checkpoint to resume would be.
    Trainer(const TrainConfig& config, Backend& backend, StepSync* sync = nullptr, const TrainState* joined = nullptr);
    ~Trainer();
    Trainer(const Trainer&) = delete;
    Trainer& operator=(const Trainer&) = delete;

    // Set up before run(), from the thread that will run it.
    void add_observer(TrainObserver* observer);
    void remove_observer(TrainObserver* observer);
    // The run's model reports op timings to `sink` every step and GEMM operands every
    // config.capture_every steps. nullptr: no capture.
    void set_capture_sink(int run, CaptureSink* sink);

    // Thread-safe; applied between steps. switch_recipe and checkpoint_now throw
    // std::invalid_argument at once on an unknown recipe or run (a data-parallel job: on a
    // recipe that is not built in).
    void pause();
    void resume(std::string why = "");  // `why`: the Resume event's detail
    void stop();
    void switch_recipe(int run, const std::string& recipe);
    void checkpoint_now(const std::string& path = "");  // "": checkpoint.dir/step_N.ckpt
    // How the last checkpoint's parameters and moments went to the host (HostSnapshot::route);
    // empty before the first.
    std::string checkpoint_route() const;
    // Where the last checkpoint written took its time (CheckpointWriter::Done::timing);
    // empty before the first lands.
    std::string checkpoint_timing() const { return checkpoint_timing_; }
    // Capture GEMM operands every `every` steps from the next step on (0: off). Throws
    // std::invalid_argument at once when negative.
    void set_capture_every(int every);
    // Keep the individual kernel records of the next `steps` steps (the recorder's
    // on_kernel_request); throws std::invalid_argument at once unless steps >= 1.
    void record_kernels(int steps);

    // Trains until config.steps, stop() or an unrecoverable error.
    TrainSummary run();
    // One step, after applying pending requests (a pause does not block here: a paused
    // trainer takes no step). Returns false when it took none: paused, stopped, failed or
    // done. A step that is rewound returns true but completes no step.
    bool step();
    // Eval loss of every run on the held-out batches.
    std::vector<float> evaluate();

    const TrainConfig& config() const { return config_; }
    std::int64_t steps_done() const { return step_; }
    int runs() const { return static_cast<int>(runs_.size()); }
    Model& model(int run);
    const Model& model(int run) const;
    Backend& backend() const { return backend_; }
    const StepSync& step_sync() const { return *sync_; }
    const BatchSampler& data() const { return *sampler_; }
    TrainSummary summary() const;

    // The complete state, as a checkpoint holds it, and back.
    TrainState state() const;
    void restore(const TrainState& state);  // throws if it does not fit these runs
    void save_checkpoint(const std::string& path) const;

    // Test hook: right before training batch `batch` the parameters of every run are
    // multiplied by `factor`, as a diverged update would leave them (NaN: all NaN; a
    // large factor: a loss spike).
    void corrupt_params_at_batch(std::uint64_t batch, float factor);
    // Treats `batch` as one a rewind skipped (a run that never sees it).
    void skip_batch(std::uint64_t batch);
    // An event of the caller's (a health check around the training), to every observer; from
    // the training thread (before run() or in an observer's callback).
    void note(EventKind kind, std::string detail) { emit(kind, -1, std::move(detail)); }
    // Test hook: every step's compute takes `ms` longer (an injected slow rank).
    void delay_steps(double ms) { delay_ms_ = ms; }

private:
    struct Run;
    struct RunStep;
    using Request = ControlRequest;

    // A step's part of one run, from any thread (the runs go at once on a backend with
    // lanes); the training thread settles the parts in run order (step()).
    RunStep run_part(Run& rep, int run, float lr, bool capture, CaptureSink* sink);
    bool runs_together(bool capture) const;
    void run_together(std::vector<RunStep>& parts, float lr);

    std::deque<Request> take_requests();  // those made since the last call
    void apply_requests();
    void apply(const Request& r);
    // The end of a step: the job's agreement on it, to the observers.
    void agree(double step_ms);
    // Periodic, requested and final checkpoints: the parameters and moments copied to the
    // host behind the next steps (HostSnapshot), the file written in the background
    // (CheckpointWriter); events when written. A state holding a NaN/Inf (nonfinite_state;
    // the arrays' once they land) is not written: a CheckpointSkipped event says why; false
    // when known at once.
    bool write_checkpoint(std::string path);
    // Why the state must not be kept (empty: it may): a step not rewound after a non-finite
    // loss or gradient, a NaN/Inf in delayed scaling's state (read when a run's watch found
    // one, or for a checkpoint) or, given `s`, in its parameters or moments.
    std::string nonfinite_state(const TrainState* s) const;
    // A run's first NaN/Inf: the watch's operand record when it has one, else `source` at
    // this step (the failure path: reads the watch at once).
    void find_nonfinite(Run& rep, int run, NonFiniteRecord::Source source);
    void report_nonfinite(Run& rep, int run, NonFiniteRecord record);
    std::vector<std::string> report_checkpoints();  // events; the paths skipped for a NaN/Inf
    // After the final checkpoint: read it back and compare it with the trained state.
    void landing_check(const std::string& path);
    void fail_checkpoint(const std::string& why);  // an Error event; the summary fails
    void emit(EventKind kind, int run, std::string detail);
    bool recover(std::uint64_t batch, EventKind why, int run, const std::string& detail);
    struct Snapshot;
    void take_snapshot();
    // This rank's rows of each batch, after the start or a change of world.
    void shard();
    // An elastic job after `fault` in an exchange of step `in_flight`: the survivors' new world, the
    // snapshot they all hold restored and the batch split over them (a WorldChanged
    // event); false when the job ends instead (an Error event, and rank 0's checkpoint
    // of the last snapshot).
    bool change_world(const std::exception& fault, std::int64_t in_flight);
    // An elastic job at a step boundary (an Admit request of rank 0's): the ranks waiting to
    // join get this state and join; the job goes on from a snapshot of this step, as a job
    // of the larger world resumed from its checkpoint would (a WorldChanged event; a Health
    // event per joiner that failed).
    void admit(const std::string& ranks);
    TrainState state(bool with_arrays) const;
    // Sets every run from `s`; their parameters and moments from `arrays` when given (a
    // snapshot's, in backend memory), else from s.
    void apply_state(const TrainState& s, const Snapshot* arrays);
    std::string default_checkpoint_path() const;

    TrainConfig config_;
    Backend& backend_;
    std::unique_ptr<BatchSampler> sampler_;
    std::vector<Batch> eval_batches_;
    CosineSchedule schedule_;
    std::vector<std::unique_ptr<Run>> runs_;
    std::vector<TrainObserver*> observers_;

    std::int64_t step_ = 0;
    std::uint64_t next_batch_ = 0;
    std::set<std::uint64_t> skipped_;
    std::int64_t rewinds_ = 0;
    std::unique_ptr<Snapshot> snapshot_;
    std::unique_ptr<Snapshot> previous_;  // elastic: the snapshot before snapshot_
    std::map<std::uint64_t, float> corruptions_;
    std::vector<Batch> batches_;  // this step's batch of every seed

    std::optional<NonFiniteRecord> first_nonfinite_;
    int first_nonfinite_rank_ = -1;  // of the job (StepAgreement)
    std::string unclean_;            // set by a non-finite step that was not rewound
    bool paused_ = false, stopping_ = false;
    std::string error_;
    // The first checkpoint that failed to write or read back: training goes on (every rank
    // takes the same steps; only rank 0 writes), the summary fails.
    std::string checkpoint_error_;
    std::mutex mu_;                      // guards requests_
    std::condition_variable wake_;
    std::deque<Request> requests_;

    std::unique_ptr<HostSnapshot> host_snapshot_;  // before checkpoints_: outlives its writes
    CheckpointWriter checkpoints_;
    std::string checkpoint_timing_;  // the last written one's
    SingleProcess single_;  // the sync when none is given
    StepSync* sync_;
    double delay_ms_ = 0;
    std::unique_ptr<ThreadPool> pool_;  // the runs' threads when they go at once
};

}  // namespace fp8scope
