// What a checkpoint costs the training steps around it, synchronous against asynchronous.
//
// sync:  the state copied to the host on the training thread (Trainer::state(), as
//        checkpoints were taken before host snapshots), then written by a writer thread.
// async: the trainer's own checkpoints (checkpoint.every): the parameters and moments
//        copied by a host snapshot behind the next steps (a GPU: a side stream into
//        pinned memory), then written by the writer thread.
// Each mode trains --steps steps of the config from the same start, a checkpoint every
// --every steps. Printed per mode: the median step time of the steps no checkpoint
// overlaps, and the time of each step that one overlaps (from the step that takes it to
// the one in which its file is in place), as a percentage above that median. The goal on
// an H200 with the 8 x 4096 preset: every overlapped step within 5% of the median.
//
// usage: bench_checkpoint [--device cuda] [--config FILE] [--steps 40] [--every 10]
//                         [--warmup 3] [--modes sync,async] [--dir DIR] [--threads 0]
//                         [--staging auto|staging|direct]
//   --config: a run config or preset (resources/configs/presets/gpt-8x4096.json)
//   --dir: where the checkpoints go (default: a folder under the system temp dir, removed
//          at the end; each file is as large as 12 bytes per parameter)
//   --staging: how a GPU's snapshot orders itself against the next update (sets
//              FP8SCOPE_SNAPSHOT_STAGING; backend/device_memory.h, SnapshotStaging)
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "backends.h"
#include "engine/checkpoint_writer.h"
#include "engine/trainer.h"

using namespace fp8scope;

namespace {

// Checkpoint events: a file in place (or skipped, or failed) ends its overlap.
struct Landings : TrainObserver {
    void on_event(const TrainEvent& e) override {
        if (e.kind == EventKind::Checkpoint || e.kind == EventKind::CheckpointSkipped || e.kind == EventKind::Error) {
            ++landed;
            if (e.kind != EventKind::Checkpoint) std::printf("  %s\n", e.detail.c_str());
        }
    }
    int landed = 0;
};

double median(std::vector<double> v) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
    std::string device = "cuda", config_path, modes = "sync,async", dir, staging;
    int steps = 40, every = 10, warmup = 3, threads = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string k = argv[i];
        const char* v = argv[i + 1];
        if (k == "--device") device = v;
        else if (k == "--config") config_path = v;
        else if (k == "--steps") steps = std::atoi(v);
        else if (k == "--every") every = std::atoi(v);
        else if (k == "--warmup") warmup = std::atoi(v);
        else if (k == "--modes") modes = v;
        else if (k == "--dir") dir = v;
        else if (k == "--threads") threads = std::atoi(v);
        else if (k == "--staging") staging = v;
        else {
            std::fprintf(stderr, "bench_checkpoint: unknown option %s\n", k.c_str());
            return 2;
        }
    }
    if (every < 1 || steps < warmup + every) {
        std::fprintf(stderr, "bench_checkpoint: --every must be >= 1 and --steps >= --warmup + --every\n");
        return 2;
    }
    if (!staging.empty()) ::setenv("FP8SCOPE_SNAPSHOT_STAGING", staging.c_str(), 1);
    const bool temporary = dir.empty();
    if (temporary) dir = (std::filesystem::temp_directory_path() / ("bench_checkpoint_" + std::to_string(::getpid()))).string();

    TrainConfig config;
    std::unique_ptr<Backend> backend;
    try {
        if (!config_path.empty()) config = load_train_config(config_path);
        config.device = device;
        config.threads = threads;
        config.steps = steps + 1;  // the last step evaluates: not timed
        config.eval.every = 0;
        backend = make_backend(device, threads);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bench_checkpoint: %s\n", e.what());
        return 1;
    }
    std::printf("%s\n", backend->describe().c_str());
    std::fflush(stdout);

    for (std::size_t pos = 0; pos <= modes.size();) {
        const std::size_t end = std::min(modes.find(',', pos), modes.size());
        const std::string mode = modes.substr(pos, end - pos);
        pos = end + 1;
        if (mode != "sync" && mode != "async") {
            std::fprintf(stderr, "bench_checkpoint: unknown mode '%s' (sync or async)\n", mode.c_str());
            return 2;
        }
        TrainConfig c = config;
        const bool async = mode == "async";
        c.checkpoint.dir = async ? dir : "";
        c.checkpoint.every = async ? every : 0;
        std::vector<double> ms;            // per step
        std::vector<bool> overlapped;      // a checkpoint was in flight during it
        std::string how;
        try {
            Trainer trainer(c, *backend);
            Landings landings;
            trainer.add_observer(&landings);
            CheckpointWriter writer;  // sync mode's
            int taken = 0;
            for (int s = 1; s <= steps; ++s) {
                const int landed_before = landings.landed;
                const auto t0 = std::chrono::steady_clock::now();
                trainer.step();
                if (!async && s % every == 0) {
                    writer.write(dir + "/step_" + std::to_string(s) + ".ckpt", trainer.state());
                    ++taken;
                }
                backend->synchronize();
                ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
                if (async && s % every == 0) ++taken;
                if (!async)  // the sync writer's files, as the trainer reports its own
                    for (const auto& d : writer.finished()) landings.landed += d.error.empty() ? 1 : 0;
                // In flight during this step: taken at its end, or one taken before that had
                // not landed when the step began.
                overlapped.push_back(s % every == 0 || taken > landed_before);
            }
            writer.wait();
        } catch (const std::exception& e) {
            std::fprintf(stderr, "bench_checkpoint: %s: %s\n", mode.c_str(), e.what());
            return 1;
        }
        std::vector<double> quiet;
        for (std::size_t i = std::size_t(warmup); i < ms.size(); ++i)
            if (!overlapped[i]) quiet.push_back(ms[i]);
        const double med = median(quiet);
        std::printf("%-5s median %.1f ms over %zu steps without a checkpoint; steps with one in flight:\n", mode.c_str(),
                    med, quiet.size());
        double worst = 0;
        for (std::size_t i = std::size_t(warmup); i < ms.size(); ++i) {
            if (!overlapped[i]) continue;
            const double above = med > 0 ? 100.0 * (ms[i] / med - 1) : 0;
            worst = std::max(worst, above);
            std::printf("  step %3zu %9.1f ms %+7.1f%%%s\n", i + 1, ms[i], above,
                        (i + 1) % std::size_t(every) == 0 ? "  (takes the checkpoint)" : "");
        }
        std::printf("%-5s worst step with a checkpoint in flight: %+.1f%% above the median (goal: <= +5%%)\n",
                    mode.c_str(), worst);
        std::fflush(stdout);
    }
    if (temporary) std::filesystem::remove_all(dir);
    return 0;
}
