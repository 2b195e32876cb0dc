#include "engine/tcp_communicator.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string_view>
#include <vector>

namespace fp8scope {

std::string TcpCommunicator::describe() const {
    return "tcp through rank 0, " + std::to_string(world_size()) + " ranks";
}

void TcpCommunicator::all_reduce(float* data, std::int64_t n, ReduceOp op) {
    if (world_size() == 1 || n == 0) return;
    const std::size_t bytes = std::size_t(n) * sizeof(float);
    const std::vector<std::string> all =
        rendezvous_.all_gather(std::string_view(reinterpret_cast<const char*>(data), bytes));
    for (std::size_t r = 0; r < all.size(); ++r)
        if (all[r].size() != bytes)
            throw RendezvousError("all_reduce: rank " + std::to_string(r) + " sent " + std::to_string(all[r].size()) +
                                  " bytes, expected " + std::to_string(bytes) + " (ranks disagree on the array)");
    std::vector<float> in(static_cast<std::size_t>(n));
    std::vector<double> acc(static_cast<std::size_t>(n), op == ReduceOp::Max ? -INFINITY : 0.0);
    for (const std::string& blob : all) {  // rank order: every rank adds the same way
        std::memcpy(in.data(), blob.data(), bytes);
        for (std::size_t i = 0; i < in.size(); ++i) {
            // Max as NCCL's: NaN wins (a NaN amax must reach every rank).
            if (op == ReduceOp::Max) acc[i] = std::isnan(acc[i]) || std::isnan(in[i]) ? NAN : std::max<double>(acc[i], in[i]);
            else acc[i] += in[i];
        }
    }
    const double div = op == ReduceOp::Avg ? double(world_size()) : 1.0;
    for (std::size_t i = 0; i < acc.size(); ++i) data[i] = static_cast<float>(acc[i] / div);
}

}  // namespace fp8scope
