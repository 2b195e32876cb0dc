// What capture costs a training step on the CPU: the same run (delayed scaling, the
// default model) with capture off, at the default interval and at every step, writing an
// HDF5 trace with full statistics under every trace recipe. Prints the median step time
// of each and the overhead against capture off. Goal: at most 5% at the default interval.
//
// Usage: bench_capture_overhead [steps=200] [threads=0]. Timed steps should span at least
// one capture interval (the first capture step is in the warm-up).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "engine/trainer.h"
#include "trace_writer.h"
#include "train_recorder.h"

using namespace fp8scope;

namespace {

constexpr int kDefaultCaptureEvery = 100;  // what `train --out` uses when not told

struct Result {
    double median_ms = 0, mean_ms = 0;
    std::uintmax_t file_bytes = 0;
};

// capture_every < 0: no capture at all.
Result run(int steps, int threads, int capture_every) {
    TrainConfig config;
    config.recipe = "delayed";
    config.steps = steps + 3;
    config.threads = threads;
    config.eval.every = 0;
    config.capture_every = std::max(capture_every, 0);
    Trainer trainer(config);
    std::string path = (std::filesystem::temp_directory_path() / "fp8scope_bench_capture.h5").string();
    std::unique_ptr<trace::TraceWriter> writer;
    std::unique_ptr<trace::TrainRecorder> recorder;
    trace::TraceMeta meta;
    if (capture_every >= 0) {
        meta = trace::make_trace_meta(config, trainer.model(0).linears(), "bench", 10LL * config.capture_every);
        writer = std::make_unique<trace::TraceWriter>(path, meta);
        recorder = std::make_unique<trace::TrainRecorder>(meta, *writer);
        trainer.add_observer(recorder.get());
        trainer.set_capture_sink(0, recorder->sink(0));
    }
    for (int i = 0; i < 3; ++i) trainer.step();  // warm-up (the first step is also a capture step)
    std::vector<double> ms;
    for (int i = 0; i < steps; ++i) {
        auto t0 = std::chrono::steady_clock::now();
        trainer.step();
        ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    Result r;
    for (double v : ms) r.mean_ms += v / ms.size();
    std::sort(ms.begin(), ms.end());
    r.median_ms = ms[ms.size() / 2];
    if (writer) {
        writer->close();
        r.file_bytes = std::filesystem::file_size(path);
        std::filesystem::remove(path);
    }
    return r;
}

}  // namespace

int main(int argc, char** argv) {
    int steps = argc > 1 ? std::atoi(argv[1]) : 200;
    int threads = argc > 2 ? std::atoi(argv[2]) : 0;
    std::printf("capture overhead: default model, recipe delayed, %d timed steps, threads %d\n", steps, threads);
    Result off = run(steps, threads, -1);
    Result def = run(steps, threads, kDefaultCaptureEvery);
    Result ten = run(steps, threads, 10);
    Result every = run(steps, threads, 1);
    auto line = [&](const char* name, const Result& r) {
        std::printf("%-28s median %9.2f ms  mean %9.2f ms  overhead (mean) %+7.2f%%  trace %8.2f MiB\n", name,
                    r.median_ms, r.mean_ms, 100.0 * (r.mean_ms - off.mean_ms) / off.mean_ms, r.file_bytes / 1048576.0);
    };
    line("capture off", off);
    line("capture every 100 (default)", def);
    line("capture every 10", ten);
    line("capture every step", every);
    return 0;
}
