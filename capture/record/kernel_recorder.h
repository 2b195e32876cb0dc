// Kernel timings into trace records: each kernel, copy and memset a device reports
// (KernelTracing::trace_kernels) becomes an OpRecord of the run, step, op, layer, linear and
// operand of the op scope it was launched in (the StatsCaptures note every op's scope).
// A kernel of a scope nobody noted (an op inside evaluation, which records no op
// timings) belongs to the innermost noted op whose scope range holds it.
//
// Every step's records are summed per run, kernel name, op and kind (KernelStepRecord);
// the individual records are kept only on the steps the policy names (KernelPolicy): a
// day-long run writes the sums of every step and the detail where it matters. The last
// `window` steps' records wait in a rolling buffer, so an event (a loss spike, a rewind, a
// non-finite value, a health alert) keeps the steps before it too: a step's records and
// sums reach the sink `window` steps after it ran (at flush(), all of them).
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/kernel_tracing.h"
#include "stats_capture.h"
#include "trace_records.h"

namespace fp8scope::trace {

// Which steps keep their individual kernel records (`--kernel-timings`).
struct KernelPolicy {
    enum Mode { All, Capture, Every, Off } mode = Capture;
    std::int64_t every = 0;   // Every: steps 1, 1 + every, 1 + 2 every, ...
    std::int64_t window = 5;  // Capture: steps kept before and after an event

    // "all", "capture", "every=N" (N >= 1) or "off"; throws std::invalid_argument naming
    // the text otherwise.
    static KernelPolicy parse(const std::string& text, std::int64_t window = 5);
    std::string name() const;  // as parse reads it
    // Capture and Every keep the steps before and after events and live requests; All
    // keeps every step, Off none (nor any sums: no kernel timing at all).
};

class KernelRecorder : public KernelListener {
public:
    KernelRecorder(RecordSink& sink, OpNames& ops, KernelPolicy policy = {KernelPolicy::All, 0, 0});

    // The host op record of `scope` (from the training thread, when the op ends).
    // `scope_end`: scopes opened inside the op are (scope, scope_end); 0 when unknown.
    void note_scope(std::uint64_t scope, const OpRecord& host, std::uint64_t scope_end = 0);
    // The step that unscoped device work (a checkpoint's copies) is counted in; scopes
    // of steps before step - 1 are forgotten (their kernels have been flushed). `capture`:
    // the step captures operand statistics (Capture keeps its records).
    void begin_step(std::int64_t step, bool capture = false);
    // Something happened at the current step that the timings around it may explain:
    // the buffered steps and the next `window` ones keep their records (Capture, Every).
    void mark_event();
    // Keeps the records of the next `steps` steps that begin (a live request).
    void request(std::int64_t steps);
    // Writes every buffered step (the end of the run).
    void flush();

    void on_kernels(const KernelTiming* timings, std::size_t n) override;
    std::int64_t recorded() const;  // individual records written
    std::int64_t summed() const;    // records counted in the sums

private:
    struct Step {
        std::int64_t step = 0;
        bool keep = false;
        std::vector<OpRecord> records;
    };
    void write_step(Step& s);  // under mu_
    bool keeps(std::int64_t step, bool capture);

    RecordSink& sink_;
    OpNames& ops_;
    const KernelPolicy policy_;
    mutable std::mutex mu_;
    std::unordered_map<std::uint64_t, OpRecord> scopes_;
    std::map<std::uint64_t, std::uint64_t> ranges_;  // scope -> scope_end, of ops with inner scopes
    const OpRecord* owner(std::uint64_t scope) const;
    std::deque<Step> steps_;  // the current step last, at most window before it
    std::int64_t step_ = 0;
    std::int64_t after_ = 0;      // steps still to keep after an event
    std::int64_t requested_ = 0;  // steps still to keep for a live request
    std::int64_t recorded_ = 0, summed_ = 0;
};

}  // namespace fp8scope::trace
