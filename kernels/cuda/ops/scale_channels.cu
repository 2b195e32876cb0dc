// Outlier injection's scaled channels (or rows) of a GEMM operand, in place. A thread per
// element of the listed channels: each is read, multiplied with __fmul_rn (no contraction)
// and rounded once on the store, so the result equals the CPU backend's bit for bit. The
// listed channels are a few of a tensor's, so the pass is short; the indices are distinct
// (engine/injection.h checks), so no two threads write one element.
#include "cuda/ops/common.cuh"

namespace fp8scope::cuda {
namespace {

using namespace detail;

__device__ __forceinline__ float to_f32(float x) { return x; }
__device__ __forceinline__ float to_f32(bf16 x) { return bf16_to_f32(x); }
__device__ __forceinline__ void put(float* p, float x) { *p = x; }
__device__ __forceinline__ void put(bf16* p, float x) { *p = f32_to_bf16(x); }

// Element u of the listed channels: channel index[u / span], position u % span along it
// (span = rows for columns, cols for rows).
template <class T>
__global__ void scale_channels_kernel(T* t, std::int64_t cols, const std::int32_t* index, std::int64_t span,
                                      std::int64_t total, bool by_row, float factor) {
    const std::int64_t u = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (u >= total) return;
    const std::int64_t i = index[u / span], p = u % span;
    T* e = by_row ? t + i * cols + p : t + p * cols + i;
    put(e, __fmul_rn(to_f32(*e), factor));
}

template <class T>
void launch(T* t, std::int64_t rows, std::int64_t cols, const std::int32_t* index, int count, bool by_row,
            float factor, cudaStream_t stream) {
    const std::int64_t span = by_row ? cols : rows, total = span * count;
    if (total <= 0) return;
    scale_channels_kernel<<<blocks_for(total, 256), 256, 0, stream>>>(t, cols, index, span, total, by_row, factor);
    FP8SCOPE_CUDA_LAUNCHED();
}

}  // namespace

void scale_channels(bf16* t, std::int64_t rows, std::int64_t cols, const std::int32_t* index, int count, bool by_row,
                    float factor, cudaStream_t stream) {
    launch(t, rows, cols, index, count, by_row, factor, stream);
}

void scale_channels(float* t, std::int64_t rows, std::int64_t cols, const std::int32_t* index, int count, bool by_row,
                    float factor, cudaStream_t stream) {
    launch(t, rows, cols, index, count, by_row, factor, stream);
}

}  // namespace fp8scope::cuda
