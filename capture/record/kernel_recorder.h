// Kernel timings into trace records: each kernel, copy and memset a device reports
// (KernelTracing::trace_kernels) becomes an OpRecord of the run, step, op, layer, linear and
// operand of the op scope it was launched in (the StatsCaptures note every op's scope).
// A kernel of a scope nobody noted (an op inside evaluation, which records no op
// timings) belongs to the innermost noted op whose scope range holds it.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <unordered_map>

#include "backend/kernel_tracing.h"
#include "stats_capture.h"
#include "trace_records.h"

namespace fp8scope::trace {

class KernelRecorder : public KernelListener {
public:
    KernelRecorder(RecordSink& sink, OpNames& ops);

    // The host op record of `scope` (from the training thread, when the op ends).
    // `scope_end`: scopes opened inside the op are (scope, scope_end); 0 when unknown.
    void note_scope(std::uint64_t scope, const OpRecord& host, std::uint64_t scope_end = 0);
    // The step that unscoped device work (a checkpoint's copies) is counted in; scopes
    // of steps before step - 1 are forgotten (their kernels have been flushed).
    void begin_step(std::int64_t step);

    void on_kernels(const KernelTiming* timings, std::size_t n) override;
    std::int64_t recorded() const;

private:
    RecordSink& sink_;
    OpNames& ops_;
    mutable std::mutex mu_;
    std::unordered_map<std::uint64_t, OpRecord> scopes_;
    std::map<std::uint64_t, std::uint64_t> ranges_;  // scope -> scope_end, of ops with inner scopes
    const OpRecord* owner(std::uint64_t scope) const;
    std::int64_t step_ = 0;
    std::int64_t recorded_ = 0;
};

}  // namespace fp8scope::trace
