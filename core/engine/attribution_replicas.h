// Lock-step replicas of one run of a checkpoint, for counterfactual attribution
// (engine/attribution.h): every replica starts from that run's state bit for bit (its
// parameters, AdamW moments and steps, the step, the data position and skipped batches,
// its delayed-scaling histories) and differs only by its recipe.
//
// Delayed-scaling histories are kept per built-in recipe name (engine/fp8_linear.h), and a
// checkpoint holds those of the recipes its run used. A replica whose recipe uses delayed
// scaling the run never used (a baseline checkpoint, replicas of `delayed`) starts those
// histories afresh, the same in every replica, as a recipe switch would.
//
// The replicas train as the checkpoint's run would have: its config and learning-rate
// schedule (steps raised to the checkpoint's step + N when that is further, as `train
// --resume --steps` does), with these differences: no checkpoints are written, eval only
// after the last step, and rewind is off (a spike is what is being attributed; a rewind
// would skip the batch for every replica and hide it), so a non-finite loss ends the
// replicas with an error.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend.h"
#include "engine/checkpoint.h"
#include "engine/train_config.h"
#include "engine/train_events.h"
#include "engine/trainer.h"

namespace fp8scope {

struct ReplicaSource {
    std::string path;     // the checkpoint file
    TrainState state;
    TrainConfig config;   // the checkpoint's, with its custom recipes
    int run = 0;          // the run the replicas start from
};

// Loads `path` and picks the run trained under `recipe` when it holds one, else run 0.
// Throws std::runtime_error naming the file when it is missing or not a checkpoint.
ReplicaSource load_replica_source(const std::string& path, const std::string& recipe);

// The config of replicas `recipes` (their custom recipes in `custom`) trained `steps`
// steps on from `src`. `overrides`: dotted assignments (device, threads) applied first.
TrainConfig replica_config(const ReplicaSource& src, const std::vector<std::string>& recipes,
                           const std::vector<CustomRecipe>& custom, int steps,
                           const std::vector<std::string>& overrides = {});

// The checkpoint's run once per recipe of `config`, for Trainer::restore.
TrainState replica_state(const ReplicaSource& src, const TrainConfig& config);

struct ReplicaLosses {
    std::vector<std::vector<float>> train;  // per replica, per step
    std::vector<float> eval;                // per replica, after the last step
};

// The replicas of `config` from `src` on `backend`: a Trainer whose runs all start from the
// checkpoint's run. Add observers (a progress display, a trace recording) to trainer()
// before train().
class Replicas {
public:
    Replicas(const ReplicaSource& src, const TrainConfig& config, Backend& backend);
    ~Replicas();
    Trainer& trainer() { return *trainer_; }
    // Trains `steps` steps. Throws std::runtime_error when a replica's loss or gradient
    // goes non-finite, naming it and the step.
    ReplicaLosses train(int steps);

private:
    std::unique_ptr<Trainer> trainer_;
};

}  // namespace fp8scope
