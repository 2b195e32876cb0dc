// The CUDA backend's own small kernels (cuda_backend_kernels.h).
#include <cuda_bf16.h>

#include <algorithm>

#include "cuda/cuda_backend_kernels.h"
#include "cuda/runtime/check.h"

namespace fp8scope::cuda {

namespace {

constexpr int kThreads = 256;

// Four elements per thread: one 16-byte load and one 8-byte store on the aligned path.
__global__ void __launch_bounds__(kThreads) f32_to_bf16_kernel(std::uint16_t* out, const float* in, std::int64_t n,
                                                               bool vec) {
    const std::int64_t stride = std::int64_t(gridDim.x) * blockDim.x;
    for (std::int64_t t = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; t * 4 < n; t += stride) {
        const std::int64_t i = t * 4;
        if (vec && i + 4 <= n) {
            const float4 v = *reinterpret_cast<const float4*>(in + i);
            const uint2 w = make_uint2(
                std::uint32_t(__bfloat16_as_ushort(__float2bfloat16_rn(v.x))) |
                    (std::uint32_t(__bfloat16_as_ushort(__float2bfloat16_rn(v.y))) << 16),
                std::uint32_t(__bfloat16_as_ushort(__float2bfloat16_rn(v.z))) |
                    (std::uint32_t(__bfloat16_as_ushort(__float2bfloat16_rn(v.w))) << 16));
            *reinterpret_cast<uint2*>(out + i) = w;
        } else {
            for (std::int64_t j = i; j < n && j < i + 4; ++j) out[j] = __bfloat16_as_ushort(__float2bfloat16_rn(in[j]));
        }
    }
}

__global__ void __launch_bounds__(kThreads) bf16_to_f32_kernel(float* out, const std::uint16_t* in, std::int64_t n) {
    const std::int64_t stride = std::int64_t(gridDim.x) * blockDim.x;
    for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
        out[i] = __uint_as_float(std::uint32_t(in[i]) << 16);
}

}  // namespace

void bf16_to_f32(float* out, const std::uint16_t* in, std::int64_t n, cudaStream_t stream) {
    if (n <= 0) return;
    const unsigned blocks = unsigned(std::min<std::int64_t>((n + kThreads - 1) / kThreads, 65535));
    bf16_to_f32_kernel<<<blocks, kThreads, 0, stream>>>(out, in, n);
    FP8SCOPE_CUDA_LAUNCHED();
}

void f32_to_bf16(std::uint16_t* out, const float* in, std::int64_t n, cudaStream_t stream) {
    if (n <= 0) return;
    const bool vec = reinterpret_cast<std::uintptr_t>(in) % 16 == 0 && reinterpret_cast<std::uintptr_t>(out) % 8 == 0;
    const std::int64_t threads_needed = (n + 3) / 4;
    const unsigned blocks = unsigned(std::min<std::int64_t>((threads_needed + kThreads - 1) / kThreads, 65535));
    f32_to_bf16_kernel<<<blocks, kThreads, 0, stream>>>(out, in, n, vec);
    FP8SCOPE_CUDA_LAUNCHED();
}

}  // namespace fp8scope::cuda
