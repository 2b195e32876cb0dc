// The records of a run on the live stream: a RecordSink (next to the trace writer,
// behind a RecordTee) that hands every record to a LiveServer, so file and stream carry
// the same records from one producer.
#pragma once

#include "live_server.h"
#include "trace_records.h"

namespace fp8scope::live {

class LivePublisher : public trace::RecordSink {
public:
    explicit LivePublisher(LiveServer& server) : server_(server) {}
    // Throws std::invalid_argument for an op name whose id is not the next one.
    void write(trace::Record record) override;

private:
    LiveServer& server_;
};

}  // namespace fp8scope::live
