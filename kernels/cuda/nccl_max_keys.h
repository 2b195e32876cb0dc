// The float32 maximum over GPU ranks as NCCL's integer maximum of ordered keys
// (comm/max_order.h), so a NaN on one rank is not lost to ncclMax's float rule: the
// values become keys in place before the all-reduce and floats again after it.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace fp8scope::cuda {

void floats_to_max_keys(float* data, std::int64_t n, cudaStream_t stream);  // in place, int32 keys
void max_keys_to_floats(float* data, std::int64_t n, cudaStream_t stream);

}  // namespace fp8scope::cuda
