// The key kernels of nccl_max_keys.h.
#include <algorithm>

#include "comm/max_order.h"
#include "cuda/nccl_max_keys.h"
#include "cuda/runtime/check.h"

namespace fp8scope::cuda {
namespace {

constexpr int kThreads = 256;

template <bool kToKeys>
__global__ void __launch_bounds__(kThreads) map_kernel(float* data, std::int64_t n) {
    const std::int64_t stride = std::int64_t(gridDim.x) * blockDim.x;
    for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
        if constexpr (kToKeys) reinterpret_cast<std::int32_t*>(data)[i] = max_key(data[i]);
        else data[i] = from_max_key(reinterpret_cast<const std::int32_t*>(data)[i]);
    }
}

template <bool kToKeys>
void map(float* data, std::int64_t n, cudaStream_t stream) {
    if (n <= 0) return;
    const unsigned blocks = unsigned(std::min<std::int64_t>((n + kThreads - 1) / kThreads, 4096));
    map_kernel<kToKeys><<<blocks, kThreads, 0, stream>>>(data, n);
    FP8SCOPE_CUDA_LAUNCHED();
}

}  // namespace

void floats_to_max_keys(float* data, std::int64_t n, cudaStream_t stream) { map<true>(data, n, stream); }
void max_keys_to_floats(float* data, std::int64_t n, cudaStream_t stream) { map<false>(data, n, stream); }

}  // namespace fp8scope::cuda
