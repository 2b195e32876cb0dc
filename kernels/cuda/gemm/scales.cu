// Scale grids and bias brought into the form cuBLASLt reads, before a GEMM (gemm.h):
//   Tile1x128: our (rows, KB) row-major -> (KB, pad4(rows)), a transpose (tiled through
//              shared memory so that both the reads and the writes are coalesced);
//   Block128:  our (RB, KB) row-major -> (RB, pad4(KB)), only the row stride changes;
//   bias:      float32 -> BF16 for FP8 kernels, or a copy into 256-byte aligned memory;
//   alpha:     {S_dec(A) * S_dec(B), beta} for the device pointer mode.
// Grids are small (k/128 floats per row), so all jobs of a GEMM share one launch.
#include <cuda_bf16.h>

#include <algorithm>

#include "cuda/gemm/internal.h"
#include "cuda/runtime/check.h"

namespace fp8scope::cuda {
namespace detail {
namespace {

constexpr int kTile = 32;       // transpose tile (kTile x kTile floats)
constexpr int kRowsPerPass = 8;  // block = kTile x kRowsPerPass threads
constexpr int kThreads = kTile * kRowsPerPass;

// internal.h's helpers, callable from device code.
__host__ __device__ constexpr std::int64_t cdiv(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }
__host__ __device__ constexpr std::int64_t p4(std::int64_t x) { return (x + 3) / 4 * 4; }

struct Jobs {
    ScaleJob scale[2];
    BiasJob bias;
    AlphaJob alpha;
};

// dst[kb * ld + r] = src[r * KB + kb]; the padding rows [rows, ld) get 0.
__device__ void transpose_tiles(const ScaleJob& j, float (*tile)[kTile + 1]) {
    const std::int64_t KB = cdiv(j.k, 128), ld = p4(j.rows);
    const std::int64_t tiles_r = cdiv(ld, kTile), tiles_k = cdiv(KB, kTile);
    for (std::int64_t t = blockIdx.x; t < tiles_r * tiles_k; t += gridDim.x) {  // block-uniform
        const std::int64_t r0 = (t % tiles_r) * kTile, k0 = (t / tiles_r) * kTile;
        for (int i = threadIdx.y; i < kTile; i += kRowsPerPass) {
            const std::int64_t r = r0 + i, kb = k0 + threadIdx.x;
            tile[i][threadIdx.x] = (r < j.rows && kb < KB) ? j.src[r * KB + kb] : 0.0f;
        }
        __syncthreads();
        for (int i = threadIdx.y; i < kTile; i += kRowsPerPass) {
            const std::int64_t kb = k0 + i, r = r0 + threadIdx.x;
            if (kb < KB && r < ld) j.dst[kb * ld + r] = tile[threadIdx.x][i];
        }
        __syncthreads();
    }
}

// dst[rb * ld + kb] = src[rb * KB + kb]; the padding columns [KB, ld) get 0.
__device__ void repad_blocks(const ScaleJob& j) {
    const std::int64_t KB = cdiv(j.k, 128), ld = p4(KB), RB = cdiv(j.rows, 128);
    const std::int64_t stride = std::int64_t(gridDim.x) * kThreads;
    const int tid = threadIdx.y * kTile + threadIdx.x;
    for (std::int64_t i = std::int64_t(blockIdx.x) * kThreads + tid; i < RB * ld; i += stride) {
        const std::int64_t rb = i / ld, kb = i % ld;
        j.dst[i] = kb < KB ? j.src[rb * KB + kb] : 0.0f;
    }
}

__device__ void stage_bias(const BiasJob& j) {
    const std::int64_t stride = std::int64_t(gridDim.x) * kThreads;
    const int tid = threadIdx.y * kTile + threadIdx.x;
    for (std::int64_t i = std::int64_t(blockIdx.x) * kThreads + tid; i < j.n; i += stride) {
        if (j.to_bf16)
            static_cast<__nv_bfloat16*>(j.dst)[i] = __float2bfloat16_rn(j.src[i]);
        else
            static_cast<float*>(j.dst)[i] = j.src[i];
    }
}

// blockIdx.y picks the job: 0 and 1 the scale grids, 2 the bias.
__global__ void __launch_bounds__(kThreads) prepare_kernel(Jobs jobs) {
    __shared__ float tile[kTile][kTile + 1];  // +1: no bank conflicts on the transposed read
    if (jobs.alpha.dst && blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0 && threadIdx.y == 0) {
        const float a = jobs.alpha.a ? *jobs.alpha.a : 1.0f, b = jobs.alpha.b ? *jobs.alpha.b : 1.0f;
        jobs.alpha.dst[0] = __fmul_rn(a, b);
        jobs.alpha.dst[1] = jobs.alpha.beta;
    }
    if (blockIdx.y == 2) {
        if (jobs.bias.dst) stage_bias(jobs.bias);
        return;
    }
    const ScaleJob& j = jobs.scale[blockIdx.y];
    if (j.scaling == GemmScaling::Tile1x128) transpose_tiles(j, tile);
    else if (j.scaling == GemmScaling::Block128) repad_blocks(j);
}

std::int64_t blocks_for(const ScaleJob& j) {
    if (j.scaling == GemmScaling::Tile1x128)
        return ceil_div(pad4(j.rows), kTile) * ceil_div(ceil_div(j.k, 128), kTile);
    if (j.scaling == GemmScaling::Block128) return ceil_div(gemm_ready_scale_count(j.scaling, j.rows, j.k), kThreads);
    return 0;
}

}  // namespace

void prepare_gemm_inputs(const ScaleJob& a, const ScaleJob& b, const BiasJob& bias, cudaStream_t stream,
                         const AlphaJob& alpha) {
    const std::int64_t blocks = std::max({blocks_for(a), blocks_for(b), bias.dst ? ceil_div(bias.n, kThreads) : 0,
                                          std::int64_t(alpha.dst ? 1 : 0)});
    if (blocks == 0) return;
    Jobs jobs{{a, b}, bias, alpha};
    const dim3 grid(unsigned(std::min<std::int64_t>(blocks, 4096)), bias.dst ? 3u : 2u);
    prepare_kernel<<<grid, dim3(kTile, kRowsPerPass), 0, stream>>>(jobs);
    FP8SCOPE_CUDA_LAUNCHED();
}

}  // namespace detail

std::int64_t gemm_ready_scale_count(GemmScaling s, std::int64_t rows, std::int64_t k) {
    using detail::ceil_div, detail::pad4;
    switch (s) {
    case GemmScaling::PerTensor: return 1;
    case GemmScaling::Tile1x128: return ceil_div(k, 128) * pad4(rows);
    case GemmScaling::Block128: return ceil_div(rows, 128) * pad4(ceil_div(k, 128));
    case GemmScaling::None: break;
    }
    return 0;
}

std::int64_t gemm_ready_scale_index(GemmScaling s, std::int64_t rows, std::int64_t k, std::int64_t row,
                                    std::int64_t kb) {
    using detail::ceil_div, detail::pad4;
    switch (s) {
    case GemmScaling::Tile1x128: return kb * pad4(rows) + row;
    case GemmScaling::Block128: return row * pad4(ceil_div(k, 128)) + kb;
    case GemmScaling::PerTensor:
    case GemmScaling::None: break;
    }
    return 0;
}

void to_gemm_ready_scales(float* dst, const float* src, GemmScaling s, std::int64_t rows, std::int64_t k,
                          cudaStream_t stream) {
    if (s == GemmScaling::PerTensor) {
        FP8SCOPE_CUDA_CHECK(cudaMemcpyAsync(dst, src, sizeof(float), cudaMemcpyDeviceToDevice, stream));
        return;
    }
    if (s == GemmScaling::None) return;
    detail::prepare_gemm_inputs({dst, src, s, rows, k}, {}, {}, stream);
}

}  // namespace fp8scope::cuda
