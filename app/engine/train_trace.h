// What `train --out/--listen` adds to a run: the HDF5 trace writer, the live server with
// its control of the trainer, and the recorder that feeds both.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "engine/trainer.h"
#include "live_server.h"
#include "record_tee.h"
#include "trace_writer.h"
#include "train_recorder.h"

namespace fp8scope::cli {

// Capture interval of a traced run whose config says never: full statistics under every
// recipe cost about four training steps on the CPU (bench_capture_overhead), so one in
// 100 steps keeps capture within 5% of step time.
inline constexpr int kDefaultCaptureEvery = 100;

struct TraceOptions {
    std::string out;      // HDF5 trace file
    std::string listen;   // live endpoint spec ("" : no live stream)
    std::string token;    // TCP token ("" : random)
    long long blockmap_every = -1;  // -1: 10 x capture_every
    int flush_ms = 500;
    bool enabled() const { return !out.empty() || !listen.empty(); }
};

void add_trace_options(CLI::App& cmd, TraceOptions& o);

class TrainTrace {
public:
    // Creates the file and the server, prints where to connect, hooks into `trainer`.
    TrainTrace(const TraceOptions& options, const TrainConfig& config, Trainer& trainer, bool quiet);
    ~TrainTrace();
    // Records the end of the run and closes the file (throws on a write error).
    void finish(const TrainSummary& summary);

private:
    trace::TraceMeta meta_;
    trace::RecordTee tee_;
    std::unique_ptr<trace::TraceWriter> writer_;
    std::unique_ptr<trace::live::LiveServer> server_;
    std::unique_ptr<trace::TrainRecorder> recorder_;
    Trainer& trainer_;
};

}  // namespace fp8scope::cli
