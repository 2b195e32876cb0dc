#include "engine/fp8_grad_sum.h"

#include <stdexcept>
#include <string>

namespace fp8scope {

Fp8GradSum::Fp8GradSum(Backend& backend, Communicator& comm, Format format, std::size_t max_count)
    : backend_(backend), comm_(comm), format_(format) {
    const auto bytes = std::size_t(ChunkLayout{std::int64_t(max_count), comm.world_size()}.bytes());
    parts_ = DeviceBuffer<std::uint8_t>(backend, bytes);
    received_ = DeviceBuffer<std::uint8_t>(backend, bytes);
}

std::int64_t Fp8GradSum::sum(float* grads, std::int64_t n) {
    const int world = comm_.world_size(), me = comm_.rank();
    const ChunkLayout bucket{n, world};
    if (n == 0) return 0;
    if (std::size_t(bucket.bytes()) > parts_.size())
        throw std::logic_error("fp8 gradient sum: a bucket of " + std::to_string(n) + " gradients is larger than planned");
    const std::int64_t slot = bucket.slot_bytes();
    std::uint8_t* parts = parts_.data();
    std::uint8_t* received = received_.data();
    comm_.in_order([&] { backend_.quantize_chunks(parts, grads, bucket, format_); });
    comm_.all_to_all(parts, received, slot);
    // The parts are sent: their buffer now gathers the summed chunks, this rank's in place.
    float* mine = grads + bucket.begin(me);
    std::uint8_t* summed = parts + me * slot;
    comm_.in_order([&] {
        backend_.dequantize_sum(mine, received, slot, world, bucket.size(me), format_);
        backend_.quantize_chunks(summed, mine, ChunkLayout{bucket.size(me), 1}, format_);
    });
    comm_.all_gather(summed, parts, slot);
    comm_.in_order([&] {
        for (int k = 0; k < world; ++k)
            backend_.dequantize_sum(grads + bucket.begin(k), parts + k * slot, slot, 1, bucket.size(k), format_);
    });
    return bucket.bytes();
}

}  // namespace fp8scope
