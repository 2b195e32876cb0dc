// The scan for a training run's first NaN or Inf on the device (backend/nonfinite_ops.h).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace fp8scope::cuda {

// When x (n values, F32 or BF16 bits by `bf16`) holds a NaN or Inf and *first names no
// smaller tag: atomicMin(*first, tag << 32 | i), i the index of its first one (saturated
// at 2^32 - 1). A grid that finds *first already set by an earlier site returns at once.
void find_nonfinite(const void* x, bool bf16, std::int64_t n, std::uint32_t tag, unsigned long long* first,
                    cudaStream_t stream);

}  // namespace fp8scope::cuda
