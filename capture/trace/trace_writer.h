// Writing a trace: one HDF5 file in single-writer/multiple-reader (SWMR) mode. Every
// group, table and name table is created before appending starts; records are then
// queued by any thread and appended by a writer thread, so the training thread never
// touches the disk. Buffered rows reach the file at every flush (flush_interval, default
// 0.5 s); a run killed at any moment leaves a file that holds every record up to the
// last flush. Layout: docs/trace-format.md.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "trace_records.h"

namespace fp8scope::trace {

struct TraceWriterOptions {
    std::chrono::milliseconds flush_interval{500};
    // Records waiting for the writer thread; write() blocks while the queue is full, so
    // a trace is never silently incomplete.
    std::size_t queue_capacity = 8192;
};

class TraceWriter : public RecordSink {
public:
    // Creates (truncates) `path` and every object in it, writes the metadata, switches
    // to SWMR and starts the writer thread. Throws TraceError naming the file and the
    // problem (cannot create, a name longer than its table's width, ...).
    TraceWriter(const std::string& path, const TraceMeta& meta, TraceWriterOptions options = {});
    ~TraceWriter() override;  // close(), errors swallowed
    TraceWriter(const TraceWriter&) = delete;
    TraceWriter& operator=(const TraceWriter&) = delete;

    // Thread-safe. Throws std::invalid_argument when the record does not fit the meta,
    // TraceError when the writer thread has failed (disk full, ...).
    void write(Record record) override;
    // Blocks until every record written before the call is in the file and flushed.
    void flush();
    // Writes what is queued, flushes and closes the file. Idempotent.
    void close();

    const std::string& path() const;
    const TraceMeta& meta() const;  // the meta as created (ops as of the start)
    std::uint64_t flushes() const;  // completed flushes, for tests and the benchmark

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace fp8scope::trace
