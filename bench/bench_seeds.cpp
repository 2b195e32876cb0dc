// Throughput of several seeds of one model trained in lock step (Trainer, --seeds N): the
// runs of each step at once (config concurrent_runs, the default on a GPU: a stream and a
// host thread per run), the same runs one after another, and a single run, whose figure
// times N is the cost of N separate runs one after another. The goal (issue 32): --seeds 8
// of the default model at >= 4x the throughput of eight runs one after another on one H200.
//
// Each configuration trains --warmup steps, then --steps timed steps (eval off, snapshots
// and the rest of a step as in training). Printed per configuration: lock steps per second,
// run-steps per second (runs x steps), ms per lock step, and the run-step throughput
// against the single run's (the single run times N is N runs one after another).
//
// usage: bench_seeds [--device cuda] [--config FILE] [--seeds 8] [--recipe baseline]
//                    [--steps 200] [--warmup 20] [--profile FILE]
//   --profile: a sampling profile of the host threads during the runs at once
//              (sampling_profile.h; scripts/symbolize_profile.py reads it)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>

#include "backends.h"
#include "sampling_profile.h"
#include "engine/trainer.h"

using namespace fp8scope;

namespace {

struct Rate {
    double steps_per_s = 0;      // lock steps
    double run_steps_per_s = 0;  // runs x steps
};

// Trains `warmup` then `steps` timed steps of `c` on a fresh backend.
Rate measure(TrainConfig c, int warmup, int steps, const std::string& profile = {}) {
    c.steps = warmup + steps + 1;  // no final evaluation inside the timed steps
    c.eval.every = 0;
    std::unique_ptr<Backend> backend = make_backend(c.device, c.threads);
    Trainer t(c, *backend);
    for (int i = 0; i < warmup; ++i) t.step();
    backend->synchronize();
    std::unique_ptr<bench::SamplingProfile> sampler;
    if (!profile.empty()) (sampler = std::make_unique<bench::SamplingProfile>())->start();
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < steps; ++i)
        if (!t.step()) throw std::runtime_error("training stopped at step " + std::to_string(t.steps_done()));
    backend->synchronize();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (sampler && !sampler->stop(profile)) throw std::runtime_error("cannot write the profile " + profile);
    return {steps / s, double(steps) * t.runs() / s};
}

}  // namespace

int main(int argc, char** argv) {
    std::string device = "cuda", config, recipe = "baseline", profile;
    int seeds = 8, steps = 200, warmup = 20;
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string flag = argv[i], value = argv[i + 1];
        if (flag == "--device") device = value;
        else if (flag == "--config") config = value;
        else if (flag == "--recipe") recipe = value;
        else if (flag == "--seeds") seeds = std::atoi(value.c_str());
        else if (flag == "--steps") steps = std::atoi(value.c_str());
        else if (flag == "--warmup") warmup = std::atoi(value.c_str());
        else if (flag == "--profile") profile = value;
        else {
            std::fprintf(stderr, "bench_seeds: unknown flag %s\n", flag.c_str());
            return 2;
        }
    }
    if (seeds < 1 || steps < 1 || warmup < 0) {
        std::fprintf(stderr, "bench_seeds: --seeds and --steps must be >= 1, --warmup >= 0\n");
        return 2;
    }
    try {
        TrainConfig base = config.empty() ? TrainConfig{} : load_train_config(config);
        base.device = device;
        base.recipe = recipe;
        base.compare.clear();
        const ModelConfig& m = base.model;
        std::printf("bench_seeds: %s, %d layers, d_model %d, %d heads, batch %d x %d, recipe %s, %d timed steps "
                    "after %d\n",
                    device.c_str(), m.n_layer, m.d_model, m.n_head, base.batch_size, base.seq_len, recipe.c_str(),
                    steps, warmup);
        TrainConfig single = base;
        single.seeds = 1;
        const Rate one = measure(single, warmup, steps);
        TrainConfig apart = base;
        apart.seeds = seeds;
        apart.concurrent_runs = false;
        const Rate seq = measure(apart, warmup, steps);
        TrainConfig together = apart;
        together.concurrent_runs = true;
        const Rate conc = measure(together, warmup, steps, profile);

        std::printf("%-34s %12s %14s %12s %16s\n", "", "steps/s", "run-steps/s", "ms/step", "vs runs apart");
        auto row = [&](const std::string& what, const Rate& r) {
            std::printf("%-34s %12.1f %14.1f %12.3f %15.2fx\n", what.c_str(), r.steps_per_s, r.run_steps_per_s,
                        1e3 / r.steps_per_s, r.run_steps_per_s / one.run_steps_per_s);
        };
        const std::string n = std::to_string(seeds);
        row("--seeds " + n + " at once", conc);
        row("--seeds " + n + " one after another", seq);
        row("single run (x " + n + ": runs apart)", one);
        std::printf("goal: --seeds %s at once >= 4x runs apart: %.2fx\n", n.c_str(),
                    conc.run_steps_per_s / one.run_steps_per_s);
        if (make_backend(device, base.threads)->max_lanes() == 1)
            std::printf("note: the %s backend has no lanes: \"at once\" ran the runs one after another\n",
                        device.c_str());
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bench_seeds: %s\n", e.what());
        return 1;
    }
    return 0;
}
