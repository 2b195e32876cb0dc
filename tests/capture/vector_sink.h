// A RecordSink that keeps every record, for tests to look at by type.
#pragma once

#include <mutex>
#include <variant>
#include <vector>

#include "trace_records.h"

namespace fp8scope::trace {

struct VectorSink : RecordSink {
    void write(Record r) override {
        std::lock_guard lock(mu);
        records.push_back(std::move(r));
    }
    template <class T>
    std::vector<T> all() const {
        std::vector<T> out;
        for (const auto& r : records)
            if (auto* p = std::get_if<T>(&r)) out.push_back(*p);
        return out;
    }
    std::mutex mu;
    std::vector<Record> records;
};

}  // namespace fp8scope::trace
