// A backend's kernel timing: op scopes around the host code of each op, and the kernels,
// copies and memsets a device ran, reported with the scope they were launched in. A
// backend that runs no kernels (the CPU's) keeps the defaults: no scopes, no records.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace fp8scope {

// A kernel, copy or memset a device ran, on the host's steady clock (util/clock.h), as a
// kernel tracer (CUPTI) reports it: `scope` is the op scope (KernelTracing::begin_op) it
// was launched in, 0 when none.
struct KernelTiming {
    enum class Kind : std::uint8_t { Kernel = 1, Memcpy = 2, Memset = 3 };
    Kind kind = Kind::Kernel;
    std::string_view name;  // the kernel's demangled name; "memcpy HtoD", "memset", ...
    int device = 0;
    std::uint32_t stream = 0;
    std::int64_t start_ns = 0, end_ns = 0;
    std::int64_t bytes = 0;  // copies and memsets
    std::uint64_t scope = 0;
};

// Receives kernel timings in batches, from the tracer's thread.
class KernelListener {
public:
    virtual ~KernelListener() = default;
    virtual void on_kernels(const KernelTiming* timings, std::size_t n) = 0;
};

class KernelTracing {
public:
    virtual ~KernelTracing() = default;

    // Brackets the host code of one op: a device backend names it for profilers (an NVTX
    // range) and tags the kernels launched inside with `scope` (nonzero). Scopes nest.
    virtual void begin_op(std::uint64_t /*scope*/, const char* /*name*/) {}
    virtual void end_op() {}
    // Starts reporting every kernel, copy and memset to `listener` (nullptr stops).
    // Returns "" when on, else why not and what fixes it; training goes on either way.
    virtual std::string trace_kernels(KernelListener* /*listener*/) { return "the backend runs no kernels"; }
    // Reports what has run so far (waits for the device) and the records the tracer
    // dropped since it started.
    virtual void flush_kernels() {}
    virtual std::int64_t dropped_kernel_records() const { return 0; }
};

}  // namespace fp8scope
