// TrainTrace: the trace and live stream of a training run (train_trace.h).
#include "train_trace.h"

#include <cstdio>

#include "train_control.h"
#include "version.h"

namespace fp8scope::cli {

void add_trace_options(CLI::App& cmd, TraceOptions& o) {
    cmd.add_option("--out", o.out, "Write an HDF5 trace (SWMR: readable while the run goes on)");
    cmd.add_option("--listen", o.listen,
                   "Live stream and control: unix (default socket), unix:PATH, tcp:PORT (127.0.0.1) or ADDR:PORT")
        ->expected(0, 1)
        ->default_str("unix");
    cmd.add_option("--token", o.token, "Token TCP clients must send (default: random, printed at start)");
    cmd.add_option("--blockmap-every", o.blockmap_every, "Steps between block maps (default 10 x capture interval)");
    cmd.add_option("--flush-ms", o.flush_ms, "Milliseconds between trace flushes")->check(CLI::Range(1, 60000));
}

TrainTrace::TrainTrace(const TraceOptions& o, const TrainConfig& config, Trainer& trainer, bool quiet)
    : trainer_(trainer) {
    std::int64_t maps = o.blockmap_every >= 0 ? o.blockmap_every : 10LL * config.capture_every;
    meta_ = trace::make_trace_meta(config, trainer.model(0).linears(), std::string("fp8scope-engine ") + kEngineVersion,
                                   maps);
    if (!o.out.empty()) {
        trace::TraceWriterOptions wo;
        wo.flush_interval = std::chrono::milliseconds(o.flush_ms);
        writer_ = std::make_unique<trace::TraceWriter>(o.out, meta_, wo);
        tee_.add(writer_.get());
        if (!quiet) std::fprintf(stderr, "trace: %s\n", o.out.c_str());
    }
    if (!o.listen.empty()) {
        trace::live::ServerOptions so;
        so.listen = o.listen;
        so.token = o.token;
        server_ = std::make_unique<trace::live::LiveServer>(meta_, so, trace::trainer_control(trainer, &tee_));
        tee_.add(server_.get());
        // Printed even with --quiet: a client needs it to connect.
        std::fprintf(stderr, "live: %s\n", server_->address().c_str());
        if (!server_->token().empty()) std::fprintf(stderr, "live token: %s\n", server_->token().c_str());
    }
    recorder_ = std::make_unique<trace::TrainRecorder>(meta_, tee_);
    trainer.add_observer(recorder_.get());
    for (int r = 0; r < trainer.replicas(); ++r) trainer.set_capture_sink(r, recorder_->sink(r));
    tee_.write(trace::EventRecord{-1, trainer.steps_done(), trace::EventKind::Start, ""});
}

TrainTrace::~TrainTrace() {
    for (int r = 0; r < trainer_.replicas(); ++r) trainer_.set_capture_sink(r, nullptr);
}

void TrainTrace::finish(const TrainSummary& s) {
    std::string detail = s.error.empty() ? (s.stopped ? "stopped" : "done") : s.error;
    tee_.write(trace::EventRecord{-1, s.steps, trace::EventKind::End, detail});
    if (server_) server_->stop();
    if (writer_) writer_->close();
}

}  // namespace fp8scope::cli
