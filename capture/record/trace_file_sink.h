// The trace file as one of a run's record sinks, where a write error (a full disk, a file
// size limit) ends the file's recording and not the run: the records of the failing write
// and every later one are dropped, the file keeps what its last flush wrote, and the
// failure is reported once, through `on_failure`, to whoever decides whether training goes
// on. Writes come from any thread (training threads, the kernel tracer), so none may throw.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>

#include "trace_writer.h"

namespace fp8scope::trace {

class TraceFileSink : public RecordSink {
public:
    // Called once, on the thread whose write failed, with the writer's message and the
    // last step the file was given.
    using FailureHandler = std::function<void(const std::string& error, std::int64_t step)>;

    TraceFileSink(TraceWriter& writer, FailureHandler on_failure);

    void write(Record record) override;
    // Closes the file; a failure is reported (not thrown) like a failed write.
    void close();

    bool failed() const { return failed_.load(); }
    std::string error() const;  // "" while the file records

private:
    void fail(const std::string& error);

    TraceWriter& writer_;
    FailureHandler on_failure_;
    std::atomic<bool> failed_{false};
    std::atomic<std::int64_t> last_step_{-1};
    mutable std::mutex mu_;
    std::string error_;
};

}  // namespace fp8scope::trace
