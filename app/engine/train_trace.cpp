// TrainTrace: the HDF5 trace of a training run (train_trace.h).
#include "train_trace.h"

#include <cstdio>

namespace fp8scope::cli {

void add_trace_options(CLI::App& cmd, TraceOptions& o) {
    cmd.add_option("--out", o.out, "Write an HDF5 trace (SWMR: readable while the run goes on)");
    cmd.add_option("--blockmap-every", o.blockmap_every, "Steps between block maps (default 10 x capture interval)");
    cmd.add_option("--flush-ms", o.flush_ms, "Milliseconds between trace flushes")->check(CLI::Range(1, 60000));
}

TrainTrace::TrainTrace(const TraceOptions& o, trace::TraceMeta meta, Trainer& trainer, live::LiveServer* server,
                       bool quiet)
    : meta_(std::move(meta)), trainer_(trainer) {
    if (!o.out.empty()) {
        trace::TraceWriterOptions wo;
        wo.flush_interval = std::chrono::milliseconds(o.flush_ms);
        writer_ = std::make_unique<trace::TraceWriter>(o.out, meta_, wo);
        tee_.add(writer_.get());
        if (!quiet) std::fprintf(stderr, "trace: %s\n", o.out.c_str());
        writer_->write(trace::EventRecord{-1, trainer.steps_done(), trace::EventKind::Start, ""});
    }
    if (server) {
        publisher_ = std::make_unique<live::LivePublisher>(*server);
        tee_.add(publisher_.get());
    }
    recorder_ = std::make_unique<trace::TrainRecorder>(meta_, tee_);
    trainer.add_observer(recorder_.get());
    for (int r = 0; r < trainer.runs(); ++r) trainer.set_capture_sink(r, recorder_->sink(r));
}

TrainTrace::~TrainTrace() {
    for (int r = 0; r < trainer_.runs(); ++r) trainer_.set_capture_sink(r, nullptr);
}

void TrainTrace::finish(std::int64_t steps, const std::string& why) {
    if (!writer_) return;
    writer_->write(trace::EventRecord{-1, steps, trace::EventKind::End, why});
    writer_->close();
}

}  // namespace fp8scope::cli
