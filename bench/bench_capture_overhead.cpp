// What capture costs a training step: the same run (delayed scaling and the default model
// unless overridden) with capture off, at the default interval, every 10 steps and every
// step, writing an HDF5 trace with full statistics under every trace recipe. Prints the
// median and mean step time of each and the overhead against capture off. Goals: on the
// CPU at most 5% at the default interval; on the GPU at most 3%.
//
// Usage: bench_capture_overhead [steps=200] [threads=0] [key=value ...], the overrides as
// `train --set` takes them (device="cuda", model.d_model=4096, recipe="current", ...);
// `capture=off,100,10,1` picks the configurations (all four by default).
// Timed steps should span at least one capture interval (the first capture step is in the
// warm-up). On the CPU the configurations' steps interleave, so a change in machine load
// hits all alike; on a GPU they run one after the other (one model in memory at a time).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "backends.h"
#include "engine/trainer.h"
#include "trace_writer.h"
#include "train_recorder.h"

using namespace fp8scope;

namespace {

constexpr int kDefaultCaptureEvery = 100;  // what `train --out` uses when not told

struct Result {
    std::vector<double> ms;
    std::vector<bool> captured;  // per timed step: a capture step
    std::uintmax_t file_bytes = 0;
    double mean() const {
        double m = 0;
        for (double v : ms) m += v / ms.size();
        return m;
    }
    // Mean of the capture steps (captured = true) or of the others.
    double mean_of(bool captured_steps, int& n) const {
        double sum = 0;
        n = 0;
        for (std::size_t i = 0; i < ms.size(); ++i)
            if (captured[i] == captured_steps) sum += ms[i], ++n;
        return n ? sum / n : 0.0;
    }
    double median() const {
        auto v = ms;
        std::sort(v.begin(), v.end());
        return v[v.size() / 2];
    }
};

// One configuration: its trainer and, unless capture_every < 0, its trace.
struct Setup {
    Setup(const TrainConfig& base, int capture_every, const std::string& path) : path(path), config(base) {
        config.capture_every = std::max(capture_every, 0);
        backend = make_backend(config.device, config.threads);
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
    std::unique_ptr<Backend> backend;
    std::unique_ptr<Trainer> trainer;
    trace::TraceMeta meta;
    std::unique_ptr<trace::TraceWriter> writer;
    std::unique_ptr<trace::TrainRecorder> recorder;
    Result result;
};

}  // namespace

void time_steps(Setup& s) {
    const int every = s.config.capture_every;
    s.result.captured.push_back(s.writer && every > 0 && s.trainer->steps_done() % every == 0);
    auto t0 = std::chrono::steady_clock::now();
    s.trainer->step();
    s.result.ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
}

int main(int argc, char** argv) {
    const int steps = argc > 1 ? std::atoi(argv[1]) : 200;
    TrainConfig base;
    base.recipe = "delayed";
    base.threads = argc > 2 ? std::atoi(argv[2]) : 0;
    base.eval.every = 0;
    std::vector<std::string> overrides;
    std::string list = "off,100,10,1";
    for (int i = 3; i < argc; ++i) {
        const std::string a = argv[i];
        if (a.rfind("capture=", 0) == 0) list = a.substr(8);
        else overrides.push_back(a);
    }
    std::string wanted(1, ',');  // ",off,100," : each key found with its commas
    wanted += list;
    wanted += ',';
    const char* keys[] = {",off,", ",100,", ",10,", ",1,"};
    std::vector<int> chosen;
    for (int i = 0; i < 4; ++i)
        if (wanted.find(keys[i]) != std::string::npos) chosen.push_back(i);
    if (chosen.empty() || chosen.front() != 0) {
        std::fprintf(stderr, "bench_capture_overhead: capture=%s must include off (the reference)\n", list.c_str());
        return 2;
    }
    try {
        apply_overrides(base, overrides);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bench_capture_overhead: %s\n", e.what());
        return 2;
    }
    base.steps = steps + 3;
    const bool interleave = base.device == "cpu";
    std::printf("capture overhead: device %s, d_model %d, %d layers, B %d, T %d, recipe %s, %d timed steps, threads %d\n",
                base.device.c_str(), base.model.d_model, base.model.n_layer, base.batch_size, base.seq_len,
                base.recipe.c_str(), steps, base.threads);
    auto tmp = std::filesystem::temp_directory_path();
    const char* names[] = {"capture off", "capture every 100 (default)", "capture every 10", "capture every step"};
    int every[] = {-1, kDefaultCaptureEvery, 10, 1};
    std::vector<std::unique_ptr<Setup>> setups;
    auto path = [&](int i) { return (tmp / ("fp8scope_bench_capture_" + std::to_string(i) + ".h5")).string(); };
    if (interleave) {
        for (int i : chosen) setups.push_back(std::make_unique<Setup>(base, every[i], path(i)));
        for (auto& s : setups)
            for (int i = 0; i < 3; ++i) s->trainer->step();  // warm-up (the first step is also a capture step)
        for (int i = 0; i < steps; ++i)
            for (auto& s : setups) time_steps(*s);
        for (auto& s : setups) s->finish();
    } else {
        for (int c : chosen) {
            auto s = std::make_unique<Setup>(base, every[c], path(c));
            for (int i = 0; i < 3; ++i) s->trainer->step();
            for (int i = 0; i < steps; ++i) time_steps(*s);
            s->finish();
            s->trainer.reset();
            s->backend.reset();
            setups.push_back(std::move(s));
        }
    }
    double off = setups[0]->result.mean();
    for (std::size_t i = 0; i < setups.size(); ++i) {
        const Result& r = setups[i]->result;
        std::printf("%-28s median %9.2f ms  mean %9.2f ms  overhead (mean) %+7.2f%%  trace %8.2f MiB\n", names[chosen[i]],
                    r.median(), r.mean(), 100.0 * (r.mean() - off) / off, r.file_bytes / 1048576.0);
    }
    // What one capture costs: its step against the same run's other steps.
    for (std::size_t i = 1; i < setups.size(); ++i) {
        const Result& r = setups[i]->result;
        int n_cap = 0, n_other = 0;
        const double cap = r.mean_of(true, n_cap), other = r.mean_of(false, n_other);
        if (n_cap && n_other)
            std::printf("%-28s capture step %9.2f ms (%d), other steps %9.2f ms (%d): a capture costs %.2f ms\n",
                        names[chosen[i]], cap, n_cap, other, n_other, cap - other);
        else if (n_cap)
            std::printf("%-28s capture step %9.2f ms (%d), a capture costs %.2f ms against capture off\n",
                        names[chosen[i]], cap, n_cap, cap - off);
    }
    return 0;
}
