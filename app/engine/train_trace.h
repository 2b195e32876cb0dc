// What `train --out` adds to a run: the HDF5 trace writer and the recorder that turns
// the trainer's records and the captured operands into trace records. With --listen the
// same capture records (operands, scaling, block maps, op timings, late op names) also
// go to the live stream, whose LiveTrain publishes the steps and events itself.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "engine/trainer.h"
#include "live_publisher.h"
#include "record_tee.h"
#include "trace_writer.h"
#include "train_recorder.h"

namespace fp8scope::cli {

// Capture interval of a traced or served run whose config says never: full statistics
// under every recipe cost about two training steps on the CPU (bench_capture_overhead),
// so one in 100 steps keeps capture near 1% of the step time.
inline constexpr int kDefaultCaptureEvery = 100;

struct TraceOptions {
    std::string out;                // HDF5 trace file ("" : none)
    long long blockmap_every = -1;  // -1: 10 x capture interval
    int flush_ms = 500;
};

void add_trace_options(CLI::App& cmd, TraceOptions& o);

class TrainTrace {
public:
    // Creates the file (when asked) with `meta` (run_trace_meta), hooks the recorder into
    // `trainer`; `server` (may be null, serving the same meta) also receives the capture
    // records.
    TrainTrace(const TraceOptions& options, trace::TraceMeta meta, Trainer& trainer, live::LiveServer* server,
               bool quiet);
    ~TrainTrace();
    // Records the end of the run and closes the file (throws on a write error).
    void finish(std::int64_t steps, const std::string& why);

private:
    trace::TraceMeta meta_;
    trace::RecordTee tee_;
    std::unique_ptr<trace::TraceWriter> writer_;
    std::unique_ptr<live::LivePublisher> publisher_;
    std::unique_ptr<trace::TrainRecorder> recorder_;
    Trainer& trainer_;
};

}  // namespace fp8scope::cli
