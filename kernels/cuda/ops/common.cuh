// What the layer-op kernels (ops_*.cu) share: BF16 <-> float32 loads and stores of one
// element or a 16-byte pack of 8, warp and block reductions in a fixed tree (so every
// reduction is bitwise reproducible), elementwise launch helpers that pick the packed
// path when the pointers allow it, and the second pass of the column sums.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <stdexcept>
#include <string>

#include "cuda/ops/ops.h"
#include "cuda/runtime/check.h"
#include "cuda/runtime/prefetch.cuh"

namespace fp8scope::cuda::detail {

constexpr int kPack = 8;  // BF16 elements in a 16-byte load

inline bool aligned16(const void* p) { return (reinterpret_cast<std::uintptr_t>(p) & 15u) == 0; }

// Blocks for `work` items of `per_block` each; grids past 2^31-1 blocks are refused.
inline unsigned blocks_for(std::int64_t work, std::int64_t per_block) {
    const std::int64_t b = (work + per_block - 1) / per_block;
    if (b > 0x7fffffff) throw std::invalid_argument("cuda ops: grid of " + std::to_string(b) + " blocks");
    return unsigned(b);
}

inline int round_up(int x, int m) { return (x + m - 1) / m * m; }

inline void require_workspace(const Workspace& ws, std::size_t bytes, const char* op) {
    if (bytes && (!ws.ptr || ws.bytes < bytes))
        throw std::invalid_argument(std::string("cuda ") + op + ": workspace of " + std::to_string(ws.bytes) +
                                    " bytes, needs " + std::to_string(bytes));
}

// --- element access ---------------------------------------------------------------------

__device__ __forceinline__ float bf16_to_f32(bf16 b) { return __uint_as_float(std::uint32_t(b) << 16); }
__device__ __forceinline__ bf16 f32_to_bf16(float f) { return __bfloat16_as_ushort(__float2bfloat16_rn(f)); }

// f[0..8) = the 8 BF16 values packed in p, the first in the low half of p.x.
__device__ __forceinline__ void unpack(uint4 p, float (&f)[kPack]) {
    const std::uint32_t w[4] = {p.x, p.y, p.z, p.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        f[2 * i] = __uint_as_float(w[i] << 16);
        f[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
    }
}

// f[0..VEC) = p[0..VEC); VEC is 1 or 8 (then p is 16-byte aligned).
template <int VEC>
__device__ __forceinline__ void load(const bf16* p, float (&f)[VEC]) {
    if constexpr (VEC == kPack) {
        unpack(*reinterpret_cast<const uint4*>(p), f);
    } else {
#pragma unroll
        for (int i = 0; i < VEC; ++i) f[i] = bf16_to_f32(p[i]);
    }
}

template <int VEC>
__device__ __forceinline__ void store(bf16* p, const float (&f)[VEC]) {
    if constexpr (VEC == kPack) {
        std::uint32_t w[4];
#pragma unroll
        for (int i = 0; i < 4; ++i)
            w[i] = std::uint32_t(f32_to_bf16(f[2 * i])) | (std::uint32_t(f32_to_bf16(f[2 * i + 1])) << 16);
        *reinterpret_cast<uint4*>(p) = make_uint4(w[0], w[1], w[2], w[3]);
    } else {
#pragma unroll
        for (int i = 0; i < VEC; ++i) p[i] = f32_to_bf16(f[i]);
    }
}

// float32 arrays: VEC of 4 or 8 takes 16-byte loads.
template <int VEC>
__device__ __forceinline__ void load(const float* p, float (&f)[VEC]) {
    if constexpr (VEC % 4 == 0) {
#pragma unroll
        for (int i = 0; i < VEC; i += 4) {
            const float4 v = *reinterpret_cast<const float4*>(p + i);
            f[i] = v.x, f[i + 1] = v.y, f[i + 2] = v.z, f[i + 3] = v.w;
        }
    } else {
#pragma unroll
        for (int i = 0; i < VEC; ++i) f[i] = p[i];
    }
}

template <int VEC>
__device__ __forceinline__ void store(float* p, const float (&f)[VEC]) {
    if constexpr (VEC % 4 == 0) {
#pragma unroll
        for (int i = 0; i < VEC; i += 4) *reinterpret_cast<float4*>(p + i) = make_float4(f[i], f[i + 1], f[i + 2], f[i + 3]);
    } else {
#pragma unroll
        for (int i = 0; i < VEC; ++i) p[i] = f[i];
    }
}

// --- reductions (fixed trees: the same bits on every run) --------------------------------

template <class T>
__device__ __forceinline__ T warp_sum(T v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// The sum over a 1-D block (blockDim.x a multiple of 32), returned to every thread.
// `scratch` holds 32 values; the call synchronises the block, so it may be reused.
template <class T>
__device__ __forceinline__ T block_sum(T v, T* scratch) {
    v = warp_sum(v);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
    __syncthreads();  // an earlier call's readers are done with scratch
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    return warp_sum(lane < warps ? scratch[lane] : T(0));
}

// Two sums at once (one pair of barriers).
__device__ __forceinline__ float2 block_sum2(float a, float b, float2* scratch) {
    a = warp_sum(a);
    b = warp_sum(b);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
    __syncthreads();
    if (lane == 0) scratch[warp] = make_float2(a, b);
    __syncthreads();
    const float2 s = lane < warps ? scratch[lane] : make_float2(0.0f, 0.0f);
    return make_float2(warp_sum(s.x), warp_sum(s.y));
}

// out (M) = sum over p of partial (P,M): the second pass of the deterministic column sums
// (bias and norm parameter gradients). Overwrites out. A block takes 32 columns and its 8
// warps 8 consecutive ranges of p, each summed in increasing p; the range sums then add
// in warp order. The order depends only on P (the same bits on every run), and a call
// spreads over M / 32 blocks (a thread per column left M = 4096 on 16 SMs).
constexpr int kPartialWarps = 8;

template <int UNUSED = 0>
__global__ void __launch_bounds__(32 * kPartialWarps) sum_partials_kernel(float* out, const float* partial, int P,
                                                                         std::int64_t M) {
    __shared__ float range_sum[kPartialWarps][32];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const std::int64_t c = std::int64_t(blockIdx.x) * 32 + lane;
    const int per = (P + kPartialWarps - 1) / kPartialWarps, p0 = warp * per, p1 = p0 + per < P ? p0 + per : P;
    float s = 0.0f;
    if (c < M)
        for (int p = p0; p < p1; ++p) s += partial[std::int64_t(p) * M + c];
    range_sum[warp][lane] = s;
    __syncthreads();
    if (warp != 0 || c >= M) return;
    for (int w = 1; w < kPartialWarps; ++w) s += range_sum[w][lane];
    out[c] = s;
}

inline void sum_partials(float* out, const float* partial, int P, std::int64_t M, cudaStream_t stream) {
    sum_partials_kernel<<<blocks_for(M, 32), 32 * kPartialWarps, 0, stream>>>(out, partial, P, M);
    FP8SCOPE_CUDA_LAUNCHED();
}

// --- elementwise launches -----------------------------------------------------------------

// out[i] = op(a[i]) over n BF16 elements; a thread takes VEC of them, the last one the tail.
template <int VEC, class Op>
__global__ void unary_kernel(bf16* out, const bf16* a, std::int64_t n, Op op) {
    std::int64_t i = (std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x) * VEC;
    if (i + VEC <= n) {
        float x[VEC], y[VEC];
        load<VEC>(a + i, x);
#pragma unroll
        for (int k = 0; k < VEC; ++k) y[k] = op(x[k]);
        store<VEC>(out + i, y);
    } else {
        for (; i < n; ++i) out[i] = f32_to_bf16(op(bf16_to_f32(a[i])));
    }
}

template <int VEC, class Op>
__global__ void binary_kernel(bf16* out, const bf16* a, const bf16* b, std::int64_t n, Op op) {
    std::int64_t i = (std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x) * VEC;
    if (i + VEC <= n) {
        float x[VEC], y[VEC], z[VEC];
        load<VEC>(a + i, x);
        load<VEC>(b + i, y);
#pragma unroll
        for (int k = 0; k < VEC; ++k) z[k] = op(x[k], y[k]);
        store<VEC>(out + i, z);
    } else {
        for (; i < n; ++i) out[i] = f32_to_bf16(op(bf16_to_f32(a[i]), bf16_to_f32(b[i])));
    }
}

template <class Op>
void launch_unary(bf16* out, const bf16* a, std::int64_t n, Op op, cudaStream_t stream) {
    if (n <= 0) return;
    if (aligned16(out) && aligned16(a))
        unary_kernel<kPack><<<blocks_for((n + kPack - 1) / kPack, 256), 256, 0, stream>>>(out, a, n, op);
    else
        unary_kernel<1><<<blocks_for(n, 256), 256, 0, stream>>>(out, a, n, op);
    FP8SCOPE_CUDA_LAUNCHED();
}

template <class Op>
void launch_binary(bf16* out, const bf16* a, const bf16* b, std::int64_t n, Op op, cudaStream_t stream) {
    if (n <= 0) return;
    if (aligned16(out) && aligned16(a) && aligned16(b))
        binary_kernel<kPack><<<blocks_for((n + kPack - 1) / kPack, 256), 256, 0, stream>>>(out, a, b, n, op);
    else
        binary_kernel<1><<<blocks_for(n, 256), 256, 0, stream>>>(out, a, b, n, op);
    FP8SCOPE_CUDA_LAUNCHED();
}

}  // namespace fp8scope::cuda::detail
