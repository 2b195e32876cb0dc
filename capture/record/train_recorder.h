// Connects a Trainer to the trace data model: the TraceMeta of a run, one StatsCapture
// per run, and the trainer's step records and events turned into trace records (the
// one place they are converted). Register it with Trainer::add_observer and give each
// run sink(run); RunRecording does both.
#pragma once

#include <memory>
#include <vector>

#include "comm/launch_env.h"
#include "engine/train_config.h"
#include "engine/train_events.h"
#include "engine/trainer.h"
#include "kernel_recorder.h"
#include "stats_capture.h"

namespace fp8scope::trace {

// The metadata of a training run: config JSON, runs, linears, every recipe an
// operand may be cast with, the named training recipes and the known op names, and which
// process of the job (`job`'s rank and world size; the default: rank 0 of 1) records it.
// blockmap_every < 0: 10 x the capture interval.
TraceMeta make_trace_meta(const TrainConfig& config, const std::vector<LinearInfo>& linears,
                          const std::string& tool_version, std::int64_t blockmap_every,
                          const std::vector<Recipe>& analysis = default_analysis_recipes(),
                          const LaunchEnv& job = {});

// The name of run `run`: its recipe; a recipe listed twice in compare gets its place in the
// list ("baseline#2"); with several seeds the run's seed follows ("mxfp8 s2").
std::string run_name(const TrainConfig& config, int run);

// The metadata of a trainer's run as the engine records and serves it: make_trace_meta
// with every what-if quantizer (what_if_recipes(): the FP8 ones and FP4's) plus the
// creation time, the machine (host and the backend's description) and run
// names (run_name), and for a data-parallel
// trainer the type its gradient sums travel in. The trace file and the live
// stream are given this one value, so their ids agree.
TraceMeta run_trace_meta(const TrainConfig& config, const Trainer& trainer, const std::string& tool_version,
                         std::int64_t blockmap_every, const LaunchEnv& job = {});

// Says in `meta` which steps keep their kernel records: the policy's name and window, or
// "off" when kernel timing is off or the backend has no device kernels (the CPU).
void set_kernel_policy(TraceMeta& meta, const KernelPolicy& policy, Device device);

// Events after which the steps around them keep their kernel records: a loss spike, a
// rewind, a non-finite value, a health finding (a straggler, a lost rank).
bool marks_kernel_window(EventKind kind);

class TrainRecorder : public TrainObserver {
public:
    // `kernels`: which steps keep their individual kernel records (every step's sums are
    // written whenever kernel timing is on).
    TrainRecorder(const TraceMeta& meta, RecordSink& sink, StatsCaptureOptions options = {},
                  KernelPolicy kernels = {KernelPolicy::All, 0, 0});
    CaptureSink* sink(int run);

    ~TrainRecorder() override;

    // Times every kernel, copy and memset `backend` runs, tagged with its op (one
    // kernel_timing event says whether it is on, and why not): every step's sums, and the
    // records of the steps the policy keeps; flushed after each step.
    void trace_kernels(Backend& backend);
    // Stops the kernel timing with a last flush; an event counts what the tracer dropped.
    void stop_kernels();

    void on_step_begin(std::int64_t step, bool capture) override;
    void on_step(const fp8scope::StepRecord& record) override;
    void on_event(const TrainEvent& event) override;
    void on_rank_step(const fp8scope::RankStepRecord& record) override;
    void on_kernel_request(std::int64_t steps) override;

private:
    void event(EventKind kind, std::string detail);

    const TraceMeta& meta_;
    RecordSink& sink_;
    OpNames ops_;
    std::vector<std::unique_ptr<StatsCapture>> captures_;
    KernelRecorder kernels_;
    KernelPolicy policy_;
    Backend* traced_ = nullptr;  // whose kernels are recorded
    std::int64_t step_ = 0;
};

}  // namespace fp8scope::trace
