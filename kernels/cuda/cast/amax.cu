// Amax passes of the cast: the tensor amax that current scaling needs before its cast
// (16-byte loads, four in flight per thread, fmaxf over |x|: NaN ignored, Inf included,
// one atomicMax on the float bits per CTA), and the block amaxes of the Grid fallback
// for block shapes that do not tile 128 (simple and exact: one atomicMax per block a run
// of 8 elements touches), with the kernel that turns those grids into scales afterwards.
#include <algorithm>

#include "cuda/cast/launch.cuh"
#include "cuda/runtime/check.h"
#include "cuda/runtime/dependent_launch.cuh"

namespace fp8scope::cuda::qk {

int sm_count() {
    int device = 0, n = 0;
    FP8SCOPE_CUDA_CHECK(cudaGetDevice(&device));
    FP8SCOPE_CUDA_CHECK(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device));
    return n;
}

namespace {

constexpr int kThreads = 256;

// max |x| over the 16 bytes of q (8 BF16 or 4 float32).
template <class In>
__device__ __forceinline__ float amax16(uint4 q, float m) {
    const std::uint32_t w[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        if constexpr (sizeof(In) == 2) {
            m = fmaxf(m, fabsf(__uint_as_float(w[k] << 16)));
            m = fmaxf(m, fabsf(__uint_as_float(w[k] & 0xFFFF0000u)));
        } else {
            m = fmaxf(m, fabsf(__uint_as_float(w[k])));
        }
    }
    return m;
}

// The CTA's max of `bits` into *out with one atomic (bits of non-negative floats).
__device__ __forceinline__ void cta_max_into(std::uint32_t bits, std::uint32_t* out) {
    __shared__ std::uint32_t warp_max[kThreads / 32];
    bits = __reduce_max_sync(0xFFFFFFFFu, bits);
    if ((threadIdx.x & 31) == 0) warp_max[threadIdx.x >> 5] = bits;
    __syncthreads();
    if (threadIdx.x < 32) {
        bits = threadIdx.x < blockDim.x / 32 ? warp_max[threadIdx.x] : 0u;
        bits = __reduce_max_sync(0xFFFFFFFFu, bits);
        // A dependent launch waits for the zeroing of *out; every CTA waits, so the kernel's
        // end implies the end of the one before it.
        if (threadIdx.x == 0) wait_prior_grid();
        if (threadIdx.x == 0 && bits) atomicMax(out, bits);
    }
}

template <class In>
__global__ void __launch_bounds__(kThreads) tensor_amax_kernel(const In* x, std::int64_t n, bool vec,
                                                               std::uint32_t* out) {
    const std::int64_t stride = std::int64_t(gridDim.x) * blockDim.x;
    const std::int64_t t = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    float m = 0.0f;
    std::int64_t done = 0;  // elements covered by the vector loop
    if (vec) {
        constexpr int V = 16 / sizeof(In);
        const std::int64_t nv = n / V;
        const uint4* xv = reinterpret_cast<const uint4*>(x);
        std::int64_t i = t;
        for (; i + 3 * stride < nv; i += 4 * stride) {
            const uint4 a = xv[i], b = xv[i + stride], c = xv[i + 2 * stride], d = xv[i + 3 * stride];
            m = amax16<In>(d, amax16<In>(c, amax16<In>(b, amax16<In>(a, m))));
        }
        for (; i < nv; i += stride) m = amax16<In>(xv[i], m);
        done = nv * V;
    }
    for (std::int64_t i = done + t; i < n; i += stride) {
        if constexpr (sizeof(In) == 2) m = fmaxf(m, fabsf(__uint_as_float(std::uint32_t(x[i]) << 16)));
        else m = fmaxf(m, fabsf(x[i]));
    }
    allow_dependents();  // the cast after it waits for the whole max anyway
    cta_max_into(__float_as_uint(m), out);
}

// Flushes a run's block amax (MX: all ones when it held NaN/Inf) into the grid.
__device__ __forceinline__ void flush(float* grid, std::int64_t i, float m, bool nonfinite, bool mx) {
    const std::uint32_t bits = (mx && nonfinite) ? 0xFFFFFFFFu : __float_as_uint(m);
    if (bits) atomicMax(reinterpret_cast<std::uint32_t*>(grid) + i, bits);
}

template <class In>
__global__ void __launch_bounds__(kThreads) grid_amax_kernel(const TileParams p) {
    const In* x = static_cast<const In*>(p.x);
    const std::int64_t chunks = (p.cols + 7) / 8, total = p.rows * chunks;
    const std::int64_t stride = std::int64_t(gridDim.x) * blockDim.x;
    float tensor_max = 0.0f;
    for (std::int64_t t = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; t < total; t += stride) {
        const std::int64_t r = t / chunks, c0 = (t % chunks) * 8, c1 = c0 + 8 < p.cols ? c0 + 8 : p.cols;
        std::int64_t rb = -1, cb = -1;  // the block of the run so far, rowwise and columnwise copy
        float rm = 0.0f, cm = 0.0f;
        bool rnf = false, cnf = false;
        for (std::int64_t c = c0; c < c1; ++c) {
            float v;
            if constexpr (sizeof(In) == 2) v = __uint_as_float(std::uint32_t(x[r * p.cols + c]) << 16);
            else v = x[r * p.cols + c];
            const float a = fabsf(v);
            const bool nf = !(a < __uint_as_float(kInfBits));
            tensor_max = fmaxf(tensor_max, a);
            if (p.row_codes) {  // x in blocks br x bc
                const std::int64_t b = p.row_grid.index(r / p.br, c / p.bc);
                if (b != rb) {
                    if (rb >= 0) flush(p.row_sinv, rb, rm, rnf, p.mx);
                    rb = b, rm = 0.0f, rnf = false;
                }
                rm = fmaxf(rm, a), rnf |= nf;
            }
            if (p.col_codes) {  // x^T in blocks br x bc: row c / br, column r / bc
                const std::int64_t b = p.col_grid.index(c / p.br, r / p.bc);
                if (b != cb) {
                    if (cb >= 0) flush(p.col_sinv, cb, cm, cnf, p.mx);
                    cb = b, cm = 0.0f, cnf = false;
                }
                cm = fmaxf(cm, a), cnf |= nf;
            }
        }
        if (rb >= 0) flush(p.row_sinv, rb, rm, rnf, p.mx);
        if (cb >= 0) flush(p.col_sinv, cb, cm, cnf, p.mx);
    }
    cta_max_into(__float_as_uint(tensor_max), reinterpret_cast<std::uint32_t*>(&p.stats->amax));
}

template <Format F>
__global__ void __launch_bounds__(kThreads) grid_finalize_kernel(const TileParams p) {
    const std::int64_t n_row = p.row_codes ? p.row_grid.size() : 0;
    const std::int64_t n_col = p.col_codes ? p.col_grid.size() : 0;
    const std::int64_t stride = std::int64_t(gridDim.x) * blockDim.x;
    for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n_row + n_col; i += stride) {
        const bool row = i < n_row;
        const std::int64_t k = row ? i : i - n_row;
        float* sinv = row ? p.row_sinv : p.col_sinv;
        std::uint8_t* e8m0 = row ? p.row_e8m0 : p.col_e8m0;
        const BlockScale b = block_scale(__float_as_uint(sinv[k]), F, p.mx, p.rule, p.pow2);
        sinv[k] = b.scale_inv;
        if (e8m0) e8m0[k] = b.e8m0;
    }
    if (blockIdx.x == 0 && threadIdx.x == 0) p.stats->scale = float_of(kQuietNaNBits);
}

unsigned blocks_for(std::int64_t work, int per_sm) {
    const std::int64_t want = std::max<std::int64_t>(1, (work + kThreads - 1) / kThreads);
    return static_cast<unsigned>(std::min<std::int64_t>(want, std::int64_t(sm_count()) * per_sm));
}

}  // namespace

void launch_tensor_amax(const CastInput& x, std::uint32_t* amax_bits, cudaStream_t stream) {
    const std::int64_t n = x.rows * x.cols;
    if (n == 0) return;
    const bool aligned = reinterpret_cast<std::uintptr_t>(x.data) % 16 == 0;
    if (x.dtype == DType::BF16) {
        const unsigned blocks = blocks_for(aligned ? n / 8 : n, 6);
        launch_dependent(tensor_amax_kernel<std::uint16_t>, blocks, kThreads, 0, stream,
                         static_cast<const std::uint16_t*>(x.data), n, aligned, amax_bits);
    } else {
        const unsigned blocks = blocks_for(aligned ? n / 4 : n, 6);
        launch_dependent(tensor_amax_kernel<float>, blocks, kThreads, 0, stream, static_cast<const float*>(x.data), n,
                         aligned, amax_bits);
    }
    FP8SCOPE_CUDA_LAUNCHED();
}

void launch_grid_amax(const TileParams& p, DType in, cudaStream_t stream) {
    const unsigned blocks = blocks_for(p.rows * ((p.cols + 7) / 8), 8);
    if (in == DType::BF16) grid_amax_kernel<std::uint16_t><<<blocks, kThreads, 0, stream>>>(p);
    else grid_amax_kernel<float><<<blocks, kThreads, 0, stream>>>(p);
    FP8SCOPE_CUDA_LAUNCHED();
}

void launch_grid_finalize(const TileParams& p, Format f, cudaStream_t stream) {
    const std::int64_t n = (p.row_codes ? p.row_grid.size() : 0) + (p.col_codes ? p.col_grid.size() : 0);
    const unsigned blocks = blocks_for(n, 4);
    if (f == Format::E4M3) grid_finalize_kernel<Format::E4M3><<<blocks, kThreads, 0, stream>>>(p);
    else grid_finalize_kernel<Format::E5M2><<<blocks, kThreads, 0, stream>>>(p);
    FP8SCOPE_CUDA_LAUNCHED();
}

}  // namespace fp8scope::cuda::qk
