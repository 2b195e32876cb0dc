// A RecordSink that hands each record to several sinks (the trace file and the live
// stream), in order.
#pragma once

#include <vector>

#include "trace_records.h"

namespace fp8scope::trace {

class RecordTee : public RecordSink {
public:
    void add(RecordSink* sink) { sinks_.push_back(sink); }
    void write(Record record) override {
        for (std::size_t i = 0; i + 1 < sinks_.size(); ++i) sinks_[i]->write(record);
        if (!sinks_.empty()) sinks_.back()->write(std::move(record));
    }

private:
    std::vector<RecordSink*> sinks_;
};

}  // namespace fp8scope::trace
