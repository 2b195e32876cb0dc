// A backend's watch for the first non-finite value of a training run: a scan of each GEMM
// operand before its cast that leaves, in one 64-bit word of backend memory, the smallest
// key (site tag << 32 | element index) of a NaN or Inf seen so far. The word is read on
// the host where a step waits for the device anyway (engine/nonfinite_watch.h), so a
// clean step adds no synchronization: a device queues the copy and the next wait lands it.
#pragma once

#include <cstdint>
#include <limits>

#include "backend/tensor_desc.h"

namespace fp8scope {

// The word's value while nothing non-finite was seen.
inline constexpr std::uint64_t kNoNonFinite = std::numeric_limits<std::uint64_t>::max();

// The key of element `index` of the site tagged `tag`; indices past 2^32 - 1 saturate.
inline std::uint64_t nonfinite_key(std::uint32_t tag, std::uint64_t index) {
    return std::uint64_t(tag) << 32 | (index < 0xffffffffull ? index : 0xffffffffull);
}

class NonFiniteOps {
public:
    virtual ~NonFiniteOps() = default;
    // When x (row-major, F32 or BF16) holds a NaN or Inf and no site of a smaller tag did:
    // *first = min(*first, nonfinite_key(tag, i)), i the row-major index of its first one.
    // `first`: one uint64 of backend memory, kNoNonFinite before any find.
    virtual void find_nonfinite(const TensorDesc& x, std::uint32_t tag, std::uint64_t* first) = 0;
    // Queues a copy of *first to the host; staged_nonfinite() returns it once the device
    // has passed this point (after any call that waits for the device: a loss or norm read
    // back, synchronize()). Before the first stage: kNoNonFinite. One slot per backend.
    virtual void stage_nonfinite(const std::uint64_t* first) = 0;
    virtual std::uint64_t staged_nonfinite() const = 0;
};

}  // namespace fp8scope
