// The output error's reduction (output_error.h): a grid-stride pass, a block reduction in
// shared memory, then one atomic per block. Atomics make the last bits of the double sums
// depend on block order; the figures are SQNR and relative error, far above that.
#include "cuda/analysis/output_error.h"

#include <cuda_bf16.h>

#include <algorithm>
#include <stdexcept>

#include "cuda/runtime/check.h"

namespace fp8scope::cuda {
namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ float load(const float* p, std::int64_t i) { return p[i]; }
__device__ __forceinline__ float load(const std::uint16_t* p, std::int64_t i) {
    return __uint_as_float(unsigned(p[i]) << 16);
}

template <class T>
__global__ void __launch_bounds__(kThreads)
    output_error_kernel(const T* out, const T* ref, std::int64_t n, OutputErrorSums* sums) {
    __shared__ double signal[kThreads], error[kThreads];
    __shared__ float max_abs[kThreads];
    double s = 0, e = 0;
    float m = 0;
    const std::int64_t stride = std::int64_t(gridDim.x) * kThreads;
    for (std::int64_t i = std::int64_t(blockIdx.x) * kThreads + threadIdx.x; i < n; i += stride) {
        const float r = load(ref, i);
        const double d = double(load(out, i)) - double(r);
        s += double(r) * r;
        e += d * d;
        m = fmaxf(m, fabsf(float(d)));  // NaN loses to a number; an Inf output wins
    }
    signal[threadIdx.x] = s;
    error[threadIdx.x] = e;
    max_abs[threadIdx.x] = m;
    __syncthreads();
    for (int half = kThreads / 2; half > 0; half /= 2) {
        if (threadIdx.x < half) {
            signal[threadIdx.x] += signal[threadIdx.x + half];
            error[threadIdx.x] += error[threadIdx.x + half];
            max_abs[threadIdx.x] = fmaxf(max_abs[threadIdx.x], max_abs[threadIdx.x + half]);
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        atomicAdd(&sums->signal, signal[0]);
        atomicAdd(&sums->error, error[0]);
        atomicMax(&sums->max_abs_bits, __float_as_uint(max_abs[0]));
    }
}

}  // namespace

void output_error_sums(const void* out, const void* reference, DType dtype, std::int64_t n, OutputErrorSums* sums,
                       cudaStream_t stream) {
    FP8SCOPE_CUDA_CHECK(cudaMemsetAsync(sums, 0, sizeof(OutputErrorSums), stream));
    if (n <= 0) return;
    const int blocks = int(std::min<std::int64_t>((n + kThreads - 1) / kThreads, 1024));
    if (dtype == DType::F32)
        output_error_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<const float*>(out),
                                                             static_cast<const float*>(reference), n, sums);
    else if (dtype == DType::BF16)
        output_error_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<const std::uint16_t*>(out),
                                                             static_cast<const std::uint16_t*>(reference), n, sums);
    else
        throw std::logic_error("cuda output_error: outputs are F32 or BF16");
    FP8SCOPE_CUDA_LAUNCHED();
}

}  // namespace fp8scope::cuda
