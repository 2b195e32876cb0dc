// Everything a training run records, on one path: the trainer's steps, events and
// captured operands -> TrainRecorder (the one conversion to trace records) -> RecordTee ->
// {the HDF5 trace writer, the live publisher}. The app only decides where to (a file, a
// server, or both) and hands over the trainer.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "engine/trainer.h"
#include "live_publisher.h"
#include "live_server.h"
#include "record_tee.h"
#include "trace_file_sink.h"
#include "trace_writer.h"
#include "train_recorder.h"

namespace fp8scope::trace {

struct RecordingOptions {
    std::string out;  // HDF5 trace file ("": none)
    int flush_ms = 500;
    StatsCaptureOptions capture;
    // A GPU backend's kernels, copies and memsets (CUPTI): which steps keep their records
    // (every step's sums are written unless it is Off).
    KernelPolicy kernels;
    // When the trace file cannot be written (a full disk): stop training at the next step
    // boundary (its checkpoint is written as at any stop), or train on without the file.
    bool stop_on_trace_error = true;
    // Told once, from the thread whose write failed: the writer's message, the last step
    // the file was given, and whether training stops.
    std::function<void(const std::string& error, std::int64_t step, bool stopping)> on_trace_error;
};

class RunRecording {
public:
    // Creates the trace file (when options.out is set) with `meta` (run_trace_meta and
    // set_kernel_policy with options.kernels; a `server` must serve the same meta), hooks the recorder into `trainer` and records
    // a Start event on both. Throws TraceError when the file cannot be created.
    RunRecording(const RecordingOptions& options, TraceMeta meta, Trainer& trainer, live::LiveServer* server);
    ~RunRecording();  // unhooks the recorder from the trainer's runs
    RunRecording(const RunRecording&) = delete;
    RunRecording& operator=(const RunRecording&) = delete;

    // Records the End event (`why`: "done", "stopped" or the error) on both and closes
    // the file; a write error is kept in trace_error(). Called once, after the run.
    void finish(std::int64_t steps, const std::string& why);

    // Why the trace file stopped recording before the end ("" while it records): its
    // records up to the last flush before the failure stay readable.
    std::string trace_error() const { return file_ ? file_->error() : std::string(); }

private:
    TraceMeta meta_;
    Trainer& trainer_;
    RecordTee tee_;
    std::unique_ptr<TraceWriter> writer_;
    std::unique_ptr<TraceFileSink> file_;
    std::unique_ptr<live::LivePublisher> publisher_;
    std::unique_ptr<TrainRecorder> recorder_;
    bool finished_ = false;
};

}  // namespace fp8scope::trace
