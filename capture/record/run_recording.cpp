#include "run_recording.h"

#include <chrono>
#include <filesystem>

namespace fp8scope::trace {

RunRecording::RunRecording(const RecordingOptions& o, TraceMeta meta, Trainer& trainer, live::LiveServer* server)
    : meta_(std::move(meta)), trainer_(trainer) {
    if (!o.out.empty()) {
        TraceWriterOptions wo;
        wo.flush_interval = std::chrono::milliseconds(o.flush_ms);
        writer_ = std::make_unique<TraceWriter>(o.out, meta_, wo);
        file_ = std::make_unique<TraceFileSink>(
            *writer_, [this, o](const std::string& error, std::int64_t step) {
                const bool stop = o.stop_on_trace_error;
                // The live stream still runs: its clients learn why the file ends here.
                if (publisher_) {
                    std::string detail = "trace file stopped recording: " + error;
                    if (detail.size() > std::size_t(kEventDetailChars)) detail.resize(std::size_t(kEventDetailChars));
                    publisher_->write(EventRecord{-1, step, EventKind::Error, detail});
                }
                if (o.on_trace_error) o.on_trace_error(error, step, stop);
                if (stop) trainer_.stop();
            });
        tee_.add(file_.get());
    }
    if (server) {
        publisher_ = std::make_unique<live::LivePublisher>(*server);
        tee_.add(publisher_.get());
    }
    // Where the file is, absolute: a live client that joins late is told to read it for
    // the steps the server no longer keeps (live_server.h).
    std::string start;
    if (!o.out.empty()) {
        std::error_code ec;
        const auto abs = std::filesystem::absolute(o.out, ec);
        start = std::string(live::kTraceFileDetail) + (ec ? o.out : abs.string());
        if (start.size() > std::size_t(kEventDetailChars)) start.resize(std::size_t(kEventDetailChars));
    }
    tee_.write(EventRecord{-1, trainer.steps_done(), EventKind::Start, start});
    recorder_ = std::make_unique<TrainRecorder>(meta_, tee_, o.capture, o.kernels);
    trainer.add_observer(recorder_.get());
    for (int r = 0; r < trainer.runs(); ++r) trainer.set_capture_sink(r, recorder_->sink(r));
    // The CPU's ops are timed on the host already; a device's kernels need its tracer.
    if (o.kernels.mode != KernelPolicy::Off && trainer.backend().device() != Device::CPU)
        recorder_->trace_kernels(trainer.backend());
}

RunRecording::~RunRecording() {
    for (int r = 0; r < trainer_.runs(); ++r) trainer_.set_capture_sink(r, nullptr);
    trainer_.remove_observer(recorder_.get());
}

void RunRecording::finish(std::int64_t steps, const std::string& why) {
    if (finished_) return;
    finished_ = true;
    recorder_->stop_kernels();
    std::string detail = why;
    if (detail.size() > std::size_t(kEventDetailChars)) detail.resize(std::size_t(kEventDetailChars));
    tee_.write(EventRecord{-1, steps, EventKind::End, detail});
    if (file_) file_->close();
}

}  // namespace fp8scope::trace
