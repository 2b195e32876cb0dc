// AdamW and the global gradient norm on float32 master weights.
//
// AdamW repeats core/engine/optimizer.cpp operation for operation with the IEEE _rn
// intrinsics (no FMA contraction, correctly rounded division and square root), so the
// parameters and moments equal the CPU backend's bit for bit. Each element is
// independent: 16-byte loads of 4 floats per thread when aligned. Where weight decay
// applies comes as runs of indices (a model's decaying tensors): a binary search per
// thread over a few dozen runs in cache, instead of a flag byte per parameter in memory
// (1 byte of 31 a parameter moves).
// It can also write the updated parameters' BF16 copy (round to nearest even, as
// f32_to_bf16), for the GEMMs that read weights in BF16: 2 bytes a parameter more here
// instead of a separate pass of 6.
//
// grad_norm: each block sums the squares of one fixed chunk of kChunk gradients in double
// (every thread a fixed strided subset, then a fixed tree), and one block combines the
// chunk sums in a fixed order: the same bits on every run and every GPU. The norm lands
// in a device double, so the host reads it once, after the step's other work.
// Shapes: n parameters.
#include <cmath>
#include <stdexcept>
#include <string>

#include "cuda/ops/common.cuh"

namespace fp8scope::cuda {
namespace {

using namespace detail;

constexpr std::int64_t kChunk = 1 << 16;  // gradients per block of the norm's first pass
constexpr int kNormThreads = 256;

struct AdamWConsts {
    float lr, b1, b2, one_minus_b1, one_minus_b2, eps, wd, c1, c2, gs;
};

__device__ __forceinline__ void adamw_one(float& p, float g, float& m, float& v, bool decay, const AdamWConsts& k) {
    g = __fmul_rn(g, k.gs);  // clipping's factor (1: exact)
    // m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g g  (left to right, as the CPU)
    m = __fadd_rn(__fmul_rn(k.b1, m), __fmul_rn(k.one_minus_b1, g));
    v = __fadd_rn(__fmul_rn(k.b2, v), __fmul_rn(__fmul_rn(k.one_minus_b2, g), g));
    float update = __fdiv_rn(__fdiv_rn(m, k.c1), __fadd_rn(__fsqrt_rn(__fdiv_rn(v, k.c2)), k.eps));
    if (decay) update = __fadd_rn(update, __fmul_rn(k.wd, p));
    p = __fsub_rn(p, __fmul_rn(k.lr, update));
}

// The first of `count` sorted runs that ends after i (count when none does).
__device__ __forceinline__ std::int64_t run_after(const DecayRun* runs, std::int64_t count, std::int64_t i) {
    std::int64_t lo = 0, hi = count;
    while (lo < hi) {
        const std::int64_t mid = (lo + hi) / 2;
        if (__ldg(&runs[mid].end) <= i) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

// Whether element i decays; r is a run at or before i's (run_after of an earlier index),
// moved on past the runs that end at or before i.
__device__ __forceinline__ bool decays(const DecayRun* runs, std::int64_t count, std::int64_t& r, std::int64_t i) {
    while (r < count && __ldg(&runs[r].end) <= i) ++r;
    return r < count && __ldg(&runs[r].begin) <= i;
}

template <int VEC>
__global__ void adamw_kernel(float* params, const float* grads, float* m, float* v, const DecayRun* runs,
                             std::int64_t count, std::uint16_t* copy, std::int64_t n, AdamWConsts k) {
    std::int64_t i = (std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x) * VEC;
    if (i >= n) return;
    std::int64_t r = run_after(runs, count, i);
    if (i + VEC <= n) {
        float p[VEC], g[VEC], mm[VEC], vv[VEC];
        load<VEC>(params + i, p);
        load<VEC>(grads + i, g);
        load<VEC>(m + i, mm);
        load<VEC>(v + i, vv);
#pragma unroll
        for (int j = 0; j < VEC; ++j) adamw_one(p[j], g[j], mm[j], vv[j], decays(runs, count, r, i + j), k);
        store<VEC>(params + i, p);
        store<VEC>(m + i, mm);
        store<VEC>(v + i, vv);
        if (copy) {
            if constexpr (VEC == 4) {
                *reinterpret_cast<uint2*>(copy + i) =
                    make_uint2(f32_to_bf16(p[0]) | std::uint32_t(f32_to_bf16(p[1])) << 16,
                               f32_to_bf16(p[2]) | std::uint32_t(f32_to_bf16(p[3])) << 16);
            } else {
#pragma unroll
                for (int j = 0; j < VEC; ++j) copy[i + j] = f32_to_bf16(p[j]);
            }
        }
    } else {
        for (; i < n; ++i) {
            adamw_one(params[i], grads[i], m[i], v[i], decays(runs, count, r, i), k);
            if (copy) copy[i] = f32_to_bf16(params[i]);
        }
    }
}

// partial[blockIdx.x] = sum of grads^2 over chunk blockIdx.x, in double.
template <int VEC>
__global__ void sum_squares_kernel(double* partial, const float* grads, std::int64_t n) {
    __shared__ double scratch[32];
    const std::int64_t begin = std::int64_t(blockIdx.x) * kChunk;
    const std::int64_t end = begin + kChunk < n ? begin + kChunk : n;
    double s = 0.0;
    for (std::int64_t i = begin + std::int64_t(threadIdx.x) * VEC; i < end; i += std::int64_t(blockDim.x) * VEC) {
        if (i + VEC <= end) {
            float g[VEC];
            load<VEC>(grads + i, g);
#pragma unroll
            for (int j = 0; j < VEC; ++j) s += double(g[j]) * double(g[j]);
        } else {
            for (std::int64_t j = i; j < end; ++j) s += double(grads[j]) * double(grads[j]);
        }
    }
    s = block_sum(s, scratch);
    if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

__global__ void norm_combine_kernel(double* norm, const double* partial, std::int64_t chunks) {
    __shared__ double scratch[32];
    double s = 0.0;
    for (std::int64_t c = threadIdx.x; c < chunks; c += blockDim.x) s += partial[c];
    s = block_sum(s, scratch);
    if (threadIdx.x == 0) *norm = sqrt(s);
}

std::int64_t chunks(std::int64_t n) { return (n + kChunk - 1) / kChunk; }

}  // namespace

void adamw(float* params, const float* grads, float* m, float* v, const DecayRun* decay, std::int64_t runs,
           std::int64_t n, const AdamWParams& p, cudaStream_t stream, std::uint16_t* bf16_copy) {
    if (n <= 0) return;
    if (runs > 0 && !decay) throw std::invalid_argument("cuda adamw: " + std::to_string(runs) + " decay runs at null");
    const AdamWConsts k{p.lr,  p.beta1,        p.beta2,            1.0f - p.beta1,     1.0f - p.beta2,
                        p.eps, p.weight_decay, p.bias_correction1, p.bias_correction2, p.grad_scale};
    const bool packed = aligned16(params) && aligned16(grads) && aligned16(m) && aligned16(v) &&
                        (reinterpret_cast<std::uintptr_t>(bf16_copy) & 7u) == 0;
    if (packed)
        adamw_kernel<4><<<blocks_for((n + 3) / 4, 256), 256, 0, stream>>>(params, grads, m, v, decay, runs, bf16_copy,
                                                                          n, k);
    else
        adamw_kernel<1><<<blocks_for(n, 256), 256, 0, stream>>>(params, grads, m, v, decay, runs, bf16_copy, n, k);
    FP8SCOPE_CUDA_LAUNCHED();
}

std::size_t grad_norm_workspace(std::int64_t n) { return n > 0 ? std::size_t(chunks(n)) * sizeof(double) : 0; }

void grad_norm(double* norm, const float* grads, std::int64_t n, Workspace ws, cudaStream_t stream) {
    if (n <= 0) {
        FP8SCOPE_CUDA_CHECK(cudaMemsetAsync(norm, 0, sizeof(double), stream));
        return;
    }
    require_workspace(ws, grad_norm_workspace(n), "grad_norm");
    auto* partial = static_cast<double*>(ws.ptr);
    const std::int64_t c = chunks(n);
    if (aligned16(grads))
        sum_squares_kernel<4><<<blocks_for(c, 1), kNormThreads, 0, stream>>>(partial, grads, n);
    else
        sum_squares_kernel<1><<<blocks_for(c, 1), kNormThreads, 0, stream>>>(partial, grads, n);
    FP8SCOPE_CUDA_LAUNCHED();
    norm_combine_kernel<<<1, 1024, 0, stream>>>(norm, partial, c);
    FP8SCOPE_CUDA_LAUNCHED();
}

}  // namespace fp8scope::cuda
