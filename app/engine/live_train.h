// `fp8scope-engine train --listen`: serves a training run on the live stream. Publishes
// the run's metadata, step records and events, and turns client commands into the
// trainer's control requests. Operand, scaling and op records come from a capture sink,
// which publishes them through server().
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "engine/trainer.h"
#include "live_server.h"
#include "trace_records.h"

namespace fp8scope::cli {

// The run's metadata: what a live client learns first and what the trace file starts
// with. Both are given this one value, so they name the runs, linears, recipes and
// ops with the same ids and agree on every field. blockmap_every < 0: 10 x the capture
// interval.
trace::TraceMeta run_trace_meta(const TrainConfig& config, Trainer& trainer, std::int64_t blockmap_every = -1);

// The command handler: each Command to the Trainer request it names. Errors (an unknown
// recipe or run, checkpoint without a directory) become refused replies.
live::CommandReply apply_command(Trainer& trainer, const live::Command& command);

// A random token for TCP (32 hex digits from the system's random source).
std::string random_token();

class LiveTrain : public TrainObserver {
public:
    // Starts serving `meta` (run_trace_meta) at `endpoint`; publishes a Start event.
    // Throws live::LiveError.
    LiveTrain(Trainer& trainer, trace::TraceMeta meta, const live::Endpoint& endpoint, std::string token);
    ~LiveTrain() override;

    live::LiveServer& server() { return *server_; }
    void on_step(const StepRecord& record) override;
    void on_event(const TrainEvent& event) override;
    // Publishes the End event; the server stops when this object goes.
    void finish(std::int64_t steps_done, const std::string& why);

private:
    std::vector<std::string> training_recipes_;
    std::unique_ptr<live::LiveServer> server_;
};

}  // namespace fp8scope::cli
