// Gradient sums whose traffic is FP8 (`--grad-dtype e4m3|e5m2`): one byte per gradient on
// the wire instead of BF16's two or float32's four, added in float32, the same bits on
// every rank. A bucket of n gradients is cut into one chunk per rank (fp8/chunks.h):
// 1. every rank casts its share chunk by chunk, each chunk with the power-of-two scale of
//    its own amax (the scale travels in the chunk's header);
// 2. an all-to-all hands chunk j of every share to rank j: a reduce-scatter whose sum is
//    not taken in FP8;
// 3. rank j dequantizes the chunks it received and adds them in float32 in rank order,
//    then casts its summed chunk with the scale of that sum's amax;
// 4. an all-gather hands every rank every summed chunk, dequantized into the gradients.
// Each rank sends 2 (N-1)/N of the bucket's FP8 form, as a ring all-reduce sends 2 (N-1)/N
// of its BF16 or float32 form: half of BF16's traffic, a quarter of float32's.
//
// A scale per sender and chunk rather than one scale agreed by a max all-reduce of the
// ranks' amaxes before the payload: the codes are dequantized before they are added, so
// a receiver needs only the scale each chunk was cast with, and that travels with it. No
// collective waits in front of the payload (one latency fewer per bucket), and a chunk's
// own amax gives it a scale at least as fine as the largest over ranks. The ranks still
// end with the same bits: they all dequantize the same gathered codes.
//
// On a device the casts run on the communicator's stream between its collectives
// (Communicator::in_order), so backward goes on meanwhile.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backend.h"
#include "comm/communicator.h"

namespace fp8scope {

class Fp8GradSum {
public:
    // Buffers for buckets of up to `max_count` gradients.
    Fp8GradSum(Backend& backend, Communicator& comm, Format format, std::size_t max_count);

    // grads (n, backend memory) summed over ranks in place, n <= max_count. Returns the
    // bytes of this rank's FP8 form of the bucket (codes, chunk headers and padding).
    std::int64_t sum(float* grads, std::int64_t n);

private:
    Backend& backend_;
    Communicator& comm_;
    Format format_;
    // world_size slots each: the chunks this rank sends, then the summed chunks gathered.
    DeviceBuffer<std::uint8_t> parts_;
    DeviceBuffer<std::uint8_t> received_;  // chunk rank() of every rank's share
};

}  // namespace fp8scope
