// The communicator of GPU ranks: NCCL on a stream of its own, so a gradient bucket's
// all-reduce runs while backward computes the next; events order it after the work that
// produced the bucket and the optimizer after it. The backend ops of in_order() run on
// that stream too (the backend is pointed at it while they are issued). The NCCL unique
// id reaches every rank over the job's rendezvous.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <atomic>

#include "comm/communicator.h"
#include "cuda/cuda_backend.h"
#include "comm/rendezvous.h"

namespace fp8scope {

class NcclCommunicator final : public Communicator {
public:
    // Collective: every rank of `rendezvous` constructs one. Throws std::runtime_error with
    // NCCL's reason.
    NcclCommunicator(CudaBackend& backend, Rendezvous& rendezvous);
    ~NcclCommunicator() override;
    NcclCommunicator(const NcclCommunicator&) = delete;
    NcclCommunicator& operator=(const NcclCommunicator&) = delete;

    int rank() const override { return rank_; }
    int world_size() const override { return world_; }
    std::string describe() const override;
    using Communicator::all_reduce;
    void all_reduce(void* data, DType dtype, std::int64_t n, ReduceOp op) override;
    // ncclSend/ncclRecv pairs in one group; ncclAllGather of bytes (in place when `send` is
    // this rank's part of `recv`).
    void all_to_all(const void* send, void* recv, std::int64_t bytes) override;
    void all_gather(const void* send, void* recv, std::int64_t bytes) override;
    void in_order(const std::function<void()>& work) override;
    void join() override;
    void synchronize() override;
    void abort() override;

private:
    void check(ncclResult_t r, const char* what) const;
    // Throws on an aborted communicator; else orders the stream after the backend's work.
    void after_backend(const char* what);

    CudaBackend& backend_;
    int rank_ = 0, world_ = 1;
    ncclComm_t comm_ = nullptr;
    cudaStream_t stream_ = nullptr;
    cudaEvent_t issued_ = nullptr, done_ = nullptr;
    std::atomic<bool> aborted_{false};
};

}  // namespace fp8scope
