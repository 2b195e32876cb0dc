#include "trace_file_sink.h"

namespace fp8scope::trace {

TraceFileSink::TraceFileSink(TraceWriter& writer, FailureHandler on_failure)
    : writer_(writer), on_failure_(std::move(on_failure)) {}

void TraceFileSink::write(Record record) {
    if (failed_.load()) return;
    if (const auto* s = std::get_if<StepRecord>(&record)) last_step_.store(s->step);
    try {
        writer_.write(std::move(record));
    } catch (const TraceError& e) {
        fail(e.what());
    }
}

void TraceFileSink::close() {
    try {
        writer_.close();
    } catch (const TraceError& e) {
        fail(e.what());
    }
}

std::string TraceFileSink::error() const {
    std::lock_guard lock(mu_);
    return error_;
}

void TraceFileSink::fail(const std::string& error) {
    {
        std::lock_guard lock(mu_);
        if (!error_.empty()) return;
        error_ = error;
    }
    failed_.store(true);
    if (on_failure_) on_failure_(error, last_step_.load());
}

}  // namespace fp8scope::trace
