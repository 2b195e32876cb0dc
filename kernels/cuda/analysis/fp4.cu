// The amax of the Hadamard-transformed view (every full 16-run of a row through
// cast::rht16; NaN ignored, Inf included), which FP4 quantizers with rht report and NVFP4
// ones take their tensor scale S_enc from, as the CPU does. One amax serves them all.
#include "cuda/analysis/internal.h"
#include "cuda/analysis/kernels.cuh"
#include "cuda/runtime/check.h"

namespace fp8scope::cuda::an {
namespace {

// Element (r, c) of the view.
template <class T>
__device__ __forceinline__ float view_at(const TileInput& in, std::int64_t r, std::int64_t c) {
    const T* x = static_cast<const T*>(in.data);
    return as_float(in.transposed ? x[c * in.rows + r] : x[r * in.cols + c]);
}

// Grid-stride over 16-runs; consecutive threads take consecutive stored addresses (runs
// of one row, or, for a transposed view, one run position of consecutive rows).
template <class T>
__global__ void __launch_bounds__(kThreads) rht_amax_kernel(TileInput in, unsigned* amax) {
    const std::int64_t runs = (in.cols + 15) / 16, units = in.rows * runs;
    unsigned m = 0;
    for (std::int64_t u = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; u < units;
         u += std::int64_t(gridDim.x) * blockDim.x) {
        const std::int64_t r = in.transposed ? u % in.rows : u / runs, c = (in.transposed ? u / in.rows : u % runs) * 16;
        float v[16];
        const int n = in.cols - c < 16 ? int(in.cols - c) : 16;
#pragma unroll
        for (int j = 0; j < 16; ++j) v[j] = j < n ? view_at<T>(in, r, c + j) : 0.0f;
        if (n == 16) cast::rht16(v);
#pragma unroll
        for (int j = 0; j < 16; ++j) {
            const unsigned a = __float_as_uint(v[j]) & ~qk::kSignBit;
            m = max(m, a <= qk::kInfBits ? a : 0u);
        }
    }
    m = __reduce_max_sync(0xffffffffu, m);
    if (threadIdx.x % 32 == 0 && m) atomicMax(amax, m);
}

__global__ void rht_scales_kernel(Plans plans, const unsigned* amax, Params* params) {
    const float a = qk::float_of(*amax);
    for (int k = 0; k < plans.count; ++k) {
        const RecipePlan& p = plans.r[k];
        if (p.kind != kFP4 || !p.fp4_nv || !p.rht) continue;
        params->s[k] = cast::nvfp4_tensor_scale(a);
        params->si[k] = __fdiv_rn(1.0f, params->s[k]);
    }
}

}  // namespace

void launch_fp4_rht_scales(const TileInput& in, const Plans& plans, Params* params, unsigned* amax,
                           cudaStream_t stream) {
    bool any = false;
    for (int k = 0; k < plans.count; ++k) any |= plans.r[k].kind == kFP4 && plans.r[k].rht;
    if (!any) return;
    const std::int64_t units = in.rows * ((in.cols + 15) / 16);
    const unsigned blocks = unsigned(std::min<std::int64_t>(1024, (units + kThreads - 1) / kThreads));
    if (in.dtype == DType::BF16) rht_amax_kernel<std::uint16_t><<<blocks, kThreads, 0, stream>>>(in, amax);
    else rht_amax_kernel<float><<<blocks, kThreads, 0, stream>>>(in, amax);
    FP8SCOPE_CUDA_LAUNCHED();
    rht_scales_kernel<<<1, 1, 0, stream>>>(plans, amax, params);
    FP8SCOPE_CUDA_LAUNCHED();
}

}  // namespace fp8scope::cuda::an
