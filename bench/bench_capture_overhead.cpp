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

#include "cpu/cpu_backend.h"
#include "engine/trainer.h"
#include "trace_writer.h"
#include "train_recorder.h"

using namespace fp8scope;

namespace {

constexpr int kDefaultCaptureEvery = 100;  // what `train --out` uses when not told

struct Result {
    std::vector<double> ms;
    std::uintmax_t file_bytes = 0;
    double mean() const {
        double m = 0;
        for (double v : ms) m += v / ms.size();
        return m;
    }
    double median() const {
        auto v = ms;
        std::sort(v.begin(), v.end());
        return v[v.size() / 2];
    }
};

// One configuration: its trainer and, unless capture_every < 0, its trace.
struct Setup {
    Setup(int steps, int threads, int capture_every, const std::string& path) : path(path) {
        config.recipe = "delayed";
        config.steps = steps + 3;
        config.threads = threads;
        config.eval.every = 0;
        config.capture_every = std::max(capture_every, 0);
        backend = std::make_unique<CpuBackend>(threads);
        trainer = std::make_unique<Trainer>(config, *backend);
        if (capture_every >= 0) {
            meta = trace::make_trace_meta(config, trainer->model(0).linears(), "bench", 10LL * config.capture_every);
            writer = std::make_unique<trace::TraceWriter>(path, meta);
            recorder = std::make_unique<trace::TrainRecorder>(meta, *writer);
            trainer->add_observer(recorder.get());
            trainer->set_capture_sink(0, recorder->sink(0));
        }
    }
    void finish() {
        if (!writer) return;
        writer->close();
        result.file_bytes = std::filesystem::file_size(path);
        std::filesystem::remove(path);
    }
    std::string path;
    TrainConfig config;
    std::unique_ptr<CpuBackend> backend;
    std::unique_ptr<Trainer> trainer;
    trace::TraceMeta meta;
    std::unique_ptr<trace::TraceWriter> writer;
    std::unique_ptr<trace::TrainRecorder> recorder;
    Result result;
};

}  // namespace

int main(int argc, char** argv) {
    int steps = argc > 1 ? std::atoi(argv[1]) : 200;
    int threads = argc > 2 ? std::atoi(argv[2]) : 0;
    std::printf("capture overhead: default model, recipe delayed, %d timed steps, threads %d\n", steps, threads);
    auto tmp = std::filesystem::temp_directory_path();
    const char* names[] = {"capture off", "capture every 100 (default)", "capture every 10", "capture every step"};
    int every[] = {-1, kDefaultCaptureEvery, 10, 1};
    std::vector<std::unique_ptr<Setup>> setups;
    for (int i = 0; i < 4; ++i)
        setups.push_back(std::make_unique<Setup>(steps, threads, every[i],
                                                 (tmp / ("fp8scope_bench_capture_" + std::to_string(i) + ".h5")).string()));
    for (auto& s : setups)
        for (int i = 0; i < 3; ++i) s->trainer->step();  // warm-up (the first step is also a capture step)
    // Steps of the configurations interleave, so a change in machine load hits all alike.
    for (int i = 0; i < steps; ++i)
        for (auto& s : setups) {
            auto t0 = std::chrono::steady_clock::now();
            s->trainer->step();
            s->result.ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
        }
    for (auto& s : setups) s->finish();
    double off = setups[0]->result.mean();
    for (int i = 0; i < 4; ++i) {
        const Result& r = setups[i]->result;
        std::printf("%-28s median %9.2f ms  mean %9.2f ms  overhead (mean) %+7.2f%%  trace %8.2f MiB\n", names[i],
                    r.median(), r.mean(), 100.0 * (r.mean() - off) / off, r.file_bytes / 1048576.0);
    }
    return 0;
}
