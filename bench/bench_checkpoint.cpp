// What a checkpoint costs the training steps around it, synchronous against asynchronous.
//
// sync:  the state copied to the host on the training thread (Trainer::state(), as
//        checkpoints were taken before host snapshots), then written by a writer thread.
// async: the trainer's own checkpoints (checkpoint.every): the parameters and moments
//        copied by a host snapshot behind the next steps (a GPU: a side stream into
//        pinned memory), then written by the writer thread.
// Each mode trains --warmup steps of the config from the same start and takes one
// checkpoint (the buffers it allocates are reused), untimed; then --steps steps, a
// checkpoint every --every. Printed per mode: the median step time of the steps no
// checkpoint overlaps, and the time of each step that one overlaps (from the step that
// takes it to the one in which its file is seen in place), as a percentage above that
// median. The goal on an H200 with the 8 x 4096 preset: every overlapped step within 5%
// of the median. One checkpoint is in flight at a time: a file write slower than --every
// steps makes the next checkpoint wait for it (a tmpfs --dir takes the disk out).
//
// usage: bench_checkpoint [--device cuda] [--config FILE] [--steps 40] [--every 10]
//                         [--warmup 3] [--modes sync,async] [--dir DIR] [--threads 0]
//                         [--staging auto|staging|direct]
//   --config: a run config or preset (resources/configs/presets/gpt-8x4096.json)
//   --dir: where the checkpoint goes (default: a folder under the system temp dir, removed
//          at the end; the file is 12 bytes per parameter, removed before the next)
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

// Checkpoints in place (or skipped, or failed): the trainer's events, the sync writer's Done.
struct Landings : TrainObserver {
    void on_event(const TrainEvent& e) override {
        if (e.kind == EventKind::Checkpoint || e.kind == EventKind::CheckpointSkipped || e.kind == EventKind::Error) {
            ++landed;
            if (e.kind != EventKind::Checkpoint) std::printf("  %s\n", e.detail.c_str());
        }
    }
    void note(const CheckpointWriter::Done& d) {
        if (!d.error.empty()) std::printf("  %s: %s\n", d.path.c_str(), d.error.c_str());
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
    if (every < 1 || steps < every || warmup < 0) {
        std::fprintf(stderr, "bench_checkpoint: --every must be >= 1, --steps >= --every and --warmup >= 0\n");
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
        config.steps = 1000000;  // never the last step (which evaluates)
        config.eval.every = 0;
        backend = make_backend(device, threads);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bench_checkpoint: %s\n", e.what());
        return 1;
    }
    std::printf("%s\n", backend->describe().c_str());
    if (device != "cpu") {
        const char* env = std::getenv("FP8SCOPE_SNAPSHOT_STAGING");
        std::printf("snapshot staging: %s\n", env && *env ? env : "auto (device staging when the memory is free)");
    }
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
        c.checkpoint.dir = dir;  // the trainer pins its host memory before the first step
        c.checkpoint.every = 0;  // checkpoints are asked for below, at the same steps in both modes
        const std::string path = dir + "/" + mode + ".ckpt";  // one file, removed before the next
        std::vector<double> ms;        // per measured step
        std::vector<bool> overlapped;  // a checkpoint was in flight during it
        std::vector<double> begins;    // per measured step: its start, seconds after the last checkpoint's request
        std::vector<bool> takes;       // per measured step: it took a checkpoint
        std::string timing;            // the last checkpoint's (async)
        try {
            Trainer trainer(c, *backend);
            Landings landings;
            trainer.add_observer(&landings);
            CheckpointWriter writer;  // sync mode's
            int taken = 0;
            // Async asks before the step: the trainer takes it as the step begins (the state
            // of the step before), the step's time holds what that costs.
            // The last file goes before a checkpoint (never two 24 GB files at once), outside
            // the step's time: freeing a tmpfs file of 24 GB takes the host seconds.
            auto step = [&](bool take) {
                if (take && async) trainer.checkpoint_now(path);
                trainer.step();
                if (take && !async) writer.write(path, trainer.state());
                taken += take;
                backend->synchronize();
                for (const auto& d : writer.finished()) landings.landed += 1, landings.note(d);
            };
            // Warm-up, and a first checkpoint that allocates what the next ones reuse.
            for (int s = 0; s < warmup; ++s) step(false);
            std::filesystem::remove(path);
            step(true);
            while (landings.landed < taken) step(false);
            auto requested = std::chrono::steady_clock::now();
            // Past --steps while the last checkpoint is in flight: every step it overlaps counts.
            for (int s = 1; s <= steps || landings.landed < taken; ++s) {
                const int landed_before = landings.landed;
                const bool take = s <= steps && s % every == 0;
                if (take) std::filesystem::remove(path);
                const auto t0 = std::chrono::steady_clock::now();
                if (take) requested = t0;
                begins.push_back(std::chrono::duration<double>(t0 - requested).count());
                takes.push_back(take);
                step(take);
                ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
                // In flight during this step: taken in it, or taken before and not landed
                // when it began (a landing is seen one step late at most).
                overlapped.push_back(take || taken > landed_before);
            }
            writer.wait();
            if (async) std::printf("%-5s host copy: %s\n", mode.c_str(), trainer.checkpoint_route().c_str());
            timing = async ? trainer.checkpoint_timing() : "";
        } catch (const std::exception& e) {
            std::fprintf(stderr, "bench_checkpoint: %s: %s\n", mode.c_str(), e.what());
            return 1;
        }
        std::filesystem::remove(path);
        std::vector<double> quiet, busy;  // steps without a checkpoint in flight, and with one
        for (std::size_t i = 0; i < ms.size(); ++i) (overlapped[i] ? busy : quiet).push_back(ms[i]);
        const double med = median(quiet);
        auto above = [&](double t) { return med > 0 ? 100.0 * (t / med - 1) : 0.0; };
        std::printf("%-5s median %.1f ms over %zu steps without a checkpoint; steps with one in flight:\n", mode.c_str(),
                    med, quiet.size());
        for (std::size_t i = 0; i < ms.size(); ++i) {
            if (!overlapped[i]) continue;
            std::printf("  step %3zu at %+6.2f s %9.1f ms %+7.1f%%%s\n", i + 1, begins[i], ms[i], above(ms[i]),
                        takes[i] ? "  (takes the checkpoint)" : "");
        }
        if (!timing.empty()) std::printf("%-5s last checkpoint: %s\n", mode.c_str(), timing.c_str());
        // Single steps of this size come and go without a checkpoint too: the same figures
        // for both sets of steps say what the checkpoint adds.
        auto spread = [&](const char* what, const std::vector<double>& t) {
            if (t.empty()) return;
            std::size_t over = 0;
            for (double x : t) over += above(x) > 5.0;
            std::printf("%-5s %s: median %+.1f%%, worst %+.1f%%, %zu of %zu above +5%%\n", mode.c_str(), what,
                        above(median(t)), above(*std::max_element(t.begin(), t.end())), over, t.size());
        };
        spread("steps without a checkpoint", quiet);
        spread("steps with one in flight   ", busy);
        const double worst = busy.empty() ? 0.0 : above(*std::max_element(busy.begin(), busy.end()));
        std::printf("%-5s worst step with a checkpoint in flight: %+.1f%% above the median (goal: <= +5%%)\n",
                    mode.c_str(), worst);
        std::fflush(stdout);
    }
    if (temporary) std::filesystem::remove_all(dir);
    return 0;
}
