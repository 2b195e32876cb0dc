#include "engine/op_timer.h"

#include <atomic>

#include "util/clock.h"

namespace fp8scope {
namespace {

// Scopes are unique in the process: several trainers (and runs) may share one tracer.
std::atomic<std::uint64_t> next{1};

std::uint64_t next_scope() { return next.fetch_add(1, std::memory_order_relaxed); }

}  // namespace

OpTimer::OpTimer(CaptureSink* sink, Backend& backend, const char* op, int layer, int linear, int operand)
    : sink_(sink), backend_(backend) {
    timing_.op = op;
    timing_.layer = layer;
    timing_.linear = linear;
    timing_.operand = operand;
    // The scope is opened without a sink too: profilers (Nsight Systems) see the ranges.
    timing_.scope = next_scope();
    backend_.begin_op(timing_.scope, op);
    if (sink_) timing_.start_ns = now_ns();
}

OpTimer::~OpTimer() {
    backend_.end_op();
    if (!sink_) return;
    timing_.end_ns = now_ns();
    timing_.scope_end = next.load(std::memory_order_relaxed);
    sink_->on_op(timing_);
}

}  // namespace fp8scope
