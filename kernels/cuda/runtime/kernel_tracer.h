// Kernel timing on NVIDIA GPUs through CUPTI's activity API: every kernel, copy and
// memset of the process, on the host's steady clock (CUPTI is given util/clock.h's
// clock), tagged with the op scope it was launched in (an external correlation id
// pushed by begin_scope), handed to a KernelListener when flushed.
//
// CUPTI's activity API is per process, so there is one tracer, and one listener at a
// time. Buffers completed by CUPTI (on its own thread, or in a flush) are parsed into
// pending timings; flush() resolves their scopes and delivers them on the caller's
// thread, so a listener sees a step's kernels in order, after the step.
#pragma once

#include <cstdint>
#include <string>

#include "backend.h"

namespace fp8scope::cuda {

class KernelTracer {
public:
    static KernelTracer& instance();

    // Starts (listener) or stops (nullptr) recording. Returns "" when on, else why not
    // and what fixes it (insufficient privileges, another profiler attached).
    std::string start(KernelListener* listener);
    void stop();
    bool active() const;

    // Op scopes: kernels launched between begin and end carry `scope` (only while active).
    void begin_scope(std::uint64_t scope);
    void end_scope();

    // Waits for the device's records and delivers them.
    void flush();
    std::int64_t dropped() const;

    struct State;  // the parsed records (kernel_tracer.cpp; CUPTI's callbacks reach it)

private:
    KernelTracer() = default;
    State& state() const;
};

}  // namespace fp8scope::cuda
