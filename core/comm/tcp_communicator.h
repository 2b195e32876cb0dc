// The communicator of CPU ranks: collectives over the job's rendezvous connections (every
// rank's array reaches every rank through rank 0, and each rank reduces them in rank
// order, so all ranks hold the same bits; an all-to-all is an all-gather of which each
// rank keeps the parts addressed to it). Synchronous: a collective is done when it
// returns. Meant for the model sizes a CPU trains, and for testing data-parallel logic on
// machines without GPUs.
#pragma once

#include <string>

#include "comm/communicator.h"
#include "comm/rendezvous.h"

namespace fp8scope {

class TcpCommunicator final : public Communicator {
public:
    explicit TcpCommunicator(Rendezvous& rendezvous) : rendezvous_(rendezvous) {}

    int rank() const override { return rendezvous_.rank(); }
    int world_size() const override { return rendezvous_.world_size(); }
    std::string describe() const override;
    using Communicator::all_reduce;
    void all_reduce(void* data, DType dtype, std::int64_t n, ReduceOp op) override;  // host memory
    void all_to_all(const void* send, void* recv, std::int64_t bytes) override;
    void all_gather(const void* send, void* recv, std::int64_t bytes) override;
    void in_order(const std::function<void()>& work) override { work(); }
    void join() override {}
    void synchronize() override {}

private:
    Rendezvous& rendezvous_;
};

}  // namespace fp8scope
