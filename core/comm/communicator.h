// Collectives of a data-parallel job over the arrays of one backend: NCCL on GPUs, TCP
// through the job's rendezvous on CPUs (comm/tcp_communicator.h). Every rank issues the
// same collectives in the same order. A collective is ordered after the backend work issued
// before it; a device runs it on a stream of its own, so backward goes on meanwhile, and
// join() makes the backend's later work wait for it.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "backend.h"

namespace fp8scope {

enum class ReduceOp : std::uint8_t { Sum, Avg, Max };
const char* reduce_op_name(ReduceOp op);  // "sum", "avg", "max"

class Communicator {
public:
    virtual ~Communicator() = default;

    virtual int rank() const = 0;
    virtual int world_size() const = 0;
    // "nccl 2.28.3, 2 ranks" or "tcp through rank 0, 2 ranks".
    virtual std::string describe() const = 0;

    // In place over n values (F32 or BF16) in backend memory; the result is the same on
    // every rank. Max is taken on ordered integer keys (comm/max_order.h): a NaN on any
    // rank gives the quiet NaN on every rank, +0 is above -0, no denormal is flushed
    // (a GPU takes the max of float32 only).
    virtual void all_reduce(void* data, DType dtype, std::int64_t n, ReduceOp op) = 0;
    void all_reduce(float* data, std::int64_t n, ReduceOp op) { all_reduce(data, DType::F32, n, op); }
    // Raw bytes in backend memory, `bytes` per rank (FP8 gradient sums: engine/fp8_grad_sum.h).
    // all_to_all: part j of `send` (world_size() parts) goes to rank j, which receives it as
    // part rank() of `recv`. all_gather: every rank's `send` lands in part r of `recv` on
    // every rank; `send` may be this rank's own part of `recv` (in place).
    virtual void all_to_all(const void* send, void* recv, std::int64_t bytes) = 0;
    virtual void all_gather(const void* send, void* recv, std::int64_t bytes) = 0;
    // Runs `work` (backend ops issued on this thread) in the collectives' order: after the
    // backend work and the collectives issued before, before the collectives issued after.
    // A device runs it on the communicator's stream, so backward goes on meanwhile; the ops
    // must not grow the backend's scratch memory. join() covers it as a collective.
    virtual void in_order(const std::function<void()>& work) = 0;
    // The backend's work issued from now on runs after every collective issued so far.
    virtual void join() = 0;
    // The host waits for every collective issued so far (throws if one failed).
    virtual void synchronize() = 0;
    // From another thread (a watchdog): a reduction in flight fails instead of waiting for a
    // peer that died or hangs. The communicator is unusable afterwards.
    virtual void abort() {}
};

}  // namespace fp8scope
