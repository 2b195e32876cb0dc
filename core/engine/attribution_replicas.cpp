// Replicas of a checkpoint's run in lock step.
#include "engine/attribution_replicas.h"

#include <algorithm>
#include <optional>
#include <stdexcept>

namespace fp8scope {

ReplicaSource load_replica_source(const std::string& path, const std::string& recipe) {
    ReplicaSource src;
    src.path = path;
    src.state = load_checkpoint(path);
    if (src.state.runs.empty()) throw std::runtime_error(path + ": the checkpoint holds no run");
    src.config = train_config_from_json(src.state.config_json, path + " (config)");
    for (std::size_t i = 0; i < src.state.runs.size(); ++i)
        if (src.state.runs[i].recipe == recipe) {
            src.run = int(i);
            break;
        }
    return src;
}

TrainConfig replica_config(const ReplicaSource& src, const std::vector<std::string>& recipes,
                           const std::vector<CustomRecipe>& custom, int steps,
                           const std::vector<std::string>& overrides) {
    TrainConfig c = src.config;
    c.init_from.clear();  // the weights come from the checkpoint
    apply_overrides(c, overrides);
    // One process trains what the job's ranks trained together: their seed, their rows.
    c.seed = src.config.run_seed(src.run);
    c.seeds = 1;
    if (src.state.world_size > 1) c.batch_size *= src.state.world_size;
    c.compare = recipes;
    c.recipes.insert(c.recipes.end(), custom.begin(), custom.end());
    c.steps = std::max<std::int64_t>(c.steps, src.state.step + steps);
    c.eval.every = 0;
    c.checkpoint = {};
    c.rewind.enabled = false;
    c.capture_every = 0;
    c.validate();
    return c;
}

TrainState replica_state(const ReplicaSource& src, const TrainConfig& config) {
    TrainState s = src.state;
    const RunState& from = src.state.runs.at(std::size_t(src.run));
    s.runs.clear();
    for (const std::string& recipe : config.run_recipes()) {
        s.runs.push_back(from);
        s.runs.back().recipe = recipe;
    }
    return s;
}

namespace {

// Every replica's losses, and the first non-finite loss or gradient.
struct Collect : TrainObserver {
    explicit Collect(std::size_t runs) : train(runs), eval(runs) {}
    void on_step(const StepRecord& r) override {
        train[std::size_t(r.run)].push_back(r.loss);
        eval[std::size_t(r.run)] = r.eval_loss;
    }
    void on_event(const TrainEvent& e) override {
        if (e.kind == EventKind::NonFinite && !non_finite) non_finite = e;
    }
    std::vector<std::vector<float>> train;
    std::vector<std::optional<float>> eval;
    std::optional<TrainEvent> non_finite;
};

}  // namespace

Replicas::Replicas(const ReplicaSource& src, const TrainConfig& config, Backend& backend)
    : trainer_(std::make_unique<Trainer>(config, backend)) {
    trainer_->restore(replica_state(src, config));
}

Replicas::~Replicas() = default;

ReplicaLosses Replicas::train(int steps) {
    Trainer& t = *trainer_;
    Collect collect(std::size_t(t.runs()));
    t.add_observer(&collect);
    while (int(collect.train[0].size()) < steps && t.step()) {
    }
    t.remove_observer(&collect);
    if (collect.non_finite) {
        const TrainEvent& e = *collect.non_finite;
        const std::string name = e.run >= 0 ? t.config().run_recipes().at(std::size_t(e.run)) : "?";
        throw std::runtime_error("replica " + name + ": non-finite " + e.detail + " at step " +
                                 std::to_string(e.step + 1) + " (the replicas train without rewind)");
    }
    if (const std::string error = t.summary().error; !error.empty()) throw std::runtime_error(error);
    ReplicaLosses out;
    out.train = std::move(collect.train);
    const bool evaluated = std::all_of(collect.eval.begin(), collect.eval.end(), [](const auto& e) { return e.has_value(); });
    if (evaluated)
        for (const auto& e : collect.eval) out.eval.push_back(*e);
    else
        out.eval = t.evaluate();
    return out;
}

}  // namespace fp8scope
