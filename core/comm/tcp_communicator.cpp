#include "comm/tcp_communicator.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string_view>
#include <vector>

#include "comm/max_order.h"
#include "io/half.h"

namespace fp8scope {
namespace {

std::string_view bytes_at(const void* data, std::size_t bytes) { return {static_cast<const char*>(data), bytes}; }

}  // namespace

std::string TcpCommunicator::describe() const {
    return "tcp through rank 0, " + std::to_string(world_size()) + " ranks";
}

void TcpCommunicator::all_to_all(const void* send, void* recv, std::int64_t bytes) {
    if (bytes == 0) return;
    const std::size_t part = std::size_t(bytes);
    const std::vector<std::string> all =
        rendezvous_.all_gather_same_size(bytes_at(send, part * std::size_t(world_size())), "all_to_all");
    for (std::size_t r = 0; r < all.size(); ++r)
        std::memcpy(static_cast<char*>(recv) + r * part, all[r].data() + std::size_t(rank()) * part, part);
}

void TcpCommunicator::all_gather(const void* send, void* recv, std::int64_t bytes) {
    if (bytes == 0) return;
    const std::size_t part = std::size_t(bytes);
    // Copied out before `recv` is written: `send` may be a part of it.
    const std::vector<std::string> all = rendezvous_.all_gather_same_size(bytes_at(send, part), "all_gather");
    for (std::size_t r = 0; r < all.size(); ++r) std::memcpy(static_cast<char*>(recv) + r * part, all[r].data(), part);
}

void TcpCommunicator::all_reduce(void* data, DType dtype, std::int64_t n, ReduceOp op) {
    if (world_size() == 1 || n == 0) return;
    if (dtype != DType::F32 && dtype != DType::BF16)
        throw std::logic_error(std::string("tcp all_reduce: ") + dtype_name(dtype) + " is not summed here");
    const bool bf16 = dtype == DType::BF16;
    const std::size_t bytes = std::size_t(n) * dtype_size(dtype);
    const std::vector<std::string> all = rendezvous_.all_gather_same_size(bytes_at(data, bytes), "all_reduce");
    std::vector<float> in(static_cast<std::size_t>(n));
    std::vector<std::uint16_t> half(bf16 ? in.size() : 0);
    std::vector<double> acc(op == ReduceOp::Max ? 0 : in.size(), 0.0);
    std::vector<std::int32_t> top(op == ReduceOp::Max ? in.size() : 0, max_key(-INFINITY));
    for (const std::string& blob : all) {  // rank order: every rank adds the same way
        if (bf16) {
            std::memcpy(half.data(), blob.data(), bytes);
            for (std::size_t i = 0; i < in.size(); ++i) in[i] = bf16_to_float(half[i]);
        } else {
            std::memcpy(in.data(), blob.data(), bytes);
        }
        // The max on ordered keys (comm/max_order.h): a NaN on any rank wins on every rank.
        if (op == ReduceOp::Max)
            for (std::size_t i = 0; i < in.size(); ++i) top[i] = std::max(top[i], max_key(in[i]));
        else
            for (std::size_t i = 0; i < in.size(); ++i) acc[i] += in[i];
    }
    const double div = op == ReduceOp::Avg ? double(world_size()) : 1.0;
    for (std::size_t i = 0; i < in.size(); ++i) {
        const float v = op == ReduceOp::Max ? from_max_key(top[i]) : static_cast<float>(acc[i] / div);
        if (bf16) static_cast<std::uint16_t*>(data)[i] = float_to_bf16(v);
        else static_cast<float*>(data)[i] = v;
    }
}

}  // namespace fp8scope
