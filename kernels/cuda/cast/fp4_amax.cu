// The amax pass before an NVFP4 cast (fp4_tile.cuh): the scaling amax of x, and with rht
// also that of the columnwise copy after its transform, from one read. A thread takes two
// neighbouring columns over 16 rows (4-byte BF16 or 8-byte float32 pairs: a warp reads 64
// columns of a row at once, 16 loads in flight per thread), keeps max |x| and runs
// cast::rht16 down each column when the 16 rows are all inside x (a tail of fewer rows
// counts as it is, as the cast leaves it). NaN is ignored, Inf included.
#include <algorithm>

#include "cuda/cast/fp4_tile.cuh"
#include "cuda/cast/launch.cuh"
#include "cuda/runtime/check.h"

namespace fp8scope::cuda::fp4k {
namespace {

constexpr int kAmaxThreads = 256;

template <class T>
__device__ __forceinline__ void load_pair(const T* x, std::int64_t cols, std::int64_t r, std::int64_t c, bool vec,
                                          float& a, float& b) {
    const std::int64_t i = r * cols + c;
    if (vec) {
        if constexpr (sizeof(T) == 2) {
            const std::uint32_t w = __ldg(reinterpret_cast<const unsigned*>(x + i));
            a = __uint_as_float(w << 16), b = __uint_as_float(w & 0xFFFF0000u);
        } else {
            const float2 f = __ldg(reinterpret_cast<const float2*>(x + i));
            a = f.x, b = f.y;
        }
        return;
    }
    a = load_as_float(x, i);
    b = c + 1 < cols ? load_as_float(x, i + 1) : 0.0f;
}

__device__ __forceinline__ float abs_max(float m, const float (&v)[16]) {
#pragma unroll
    for (int j = 0; j < 16; ++j) m = fmaxf(m, fabsf(v[j]));  // fmaxf drops NaN
    return m;
}

template <class T>
__global__ void __launch_bounds__(kAmaxThreads) rht_amax_kernel(const T* x, std::int64_t rows, std::int64_t cols,
                                                                 bool vec, std::uint32_t* amax, std::uint32_t* col_amax) {
    __shared__ std::uint32_t cta[2];
    if (threadIdx.x < 2) cta[threadIdx.x] = 0;
    __syncthreads();
    const std::int64_t pairs = (cols + 1) / 2, blocks = (rows + 15) / 16;
    const std::int64_t stride = std::int64_t(gridDim.x) * blockDim.x;
    float m = 0.0f, mt = 0.0f;
    for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < pairs * blocks; i += stride) {
        const std::int64_t c = 2 * (i % pairs), r0 = 16 * (i / pairs);
        float a[16], b[16];
#pragma unroll
        for (int j = 0; j < 16; ++j) {
            if (r0 + j < rows) load_pair(x, cols, r0 + j, c, vec, a[j], b[j]);
            else a[j] = b[j] = 0.0f;
        }
        m = abs_max(abs_max(m, a), b);
        if (r0 + 16 <= rows) cast::rht16(a), cast::rht16(b);
        mt = abs_max(abs_max(mt, a), b);
    }
    const std::uint32_t w0 = __reduce_max_sync(0xFFFFFFFFu, __float_as_uint(m));
    const std::uint32_t w1 = __reduce_max_sync(0xFFFFFFFFu, __float_as_uint(mt));
    if ((threadIdx.x & 31) == 0) atomicMax(&cta[0], w0), atomicMax(&cta[1], w1);
    __syncthreads();
    if (threadIdx.x == 0 && cta[0]) atomicMax(amax, cta[0]);
    if (threadIdx.x == 1 && cta[1]) atomicMax(col_amax, cta[1]);
}

}  // namespace

void amax_pass(const CastInput& x, bool rht, float* amax, float* col_amax, cudaStream_t stream) {
    if (!rht) {
        scaling_amax(x, amax, stream);
        return;
    }
    FP8SCOPE_CUDA_CHECK(cudaMemsetAsync(amax, 0, sizeof(float), stream));
    FP8SCOPE_CUDA_CHECK(cudaMemsetAsync(col_amax, 0, sizeof(float), stream));
    const std::int64_t work = (x.cols + 1) / 2 * ((x.rows + 15) / 16);
    if (work == 0) return;
    const unsigned blocks = unsigned(std::min<std::int64_t>((work + kAmaxThreads - 1) / kAmaxThreads, qk::sm_count() * 8));
    auto* a = reinterpret_cast<std::uint32_t*>(amax);
    auto* ca = reinterpret_cast<std::uint32_t*>(col_amax);
    if (x.dtype == DType::BF16) {
        const bool vec = x.cols % 2 == 0 && reinterpret_cast<std::uintptr_t>(x.data) % 4 == 0;
        rht_amax_kernel<<<blocks, kAmaxThreads, 0, stream>>>(static_cast<const std::uint16_t*>(x.data), x.rows, x.cols,
                                                             vec, a, ca);
    } else {
        const bool vec = x.cols % 2 == 0 && reinterpret_cast<std::uintptr_t>(x.data) % 8 == 0;
        rht_amax_kernel<<<blocks, kAmaxThreads, 0, stream>>>(static_cast<const float*>(x.data), x.rows, x.cols, vec,
                                                             a, ca);
    }
    FP8SCOPE_CUDA_LAUNCHED();
}

}  // namespace fp8scope::cuda::fp4k
