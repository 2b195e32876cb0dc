// Fused softmax cross-entropy over the vocabulary. Forward: one block per row (N,V); each
// thread keeps an online (max, sum of exp) pair over its slice of the row, the pairs
// combine in a fixed tree (bitwise reproducible), and a second pass over the row writes
// the BF16 probabilities. Rows of up to 57344 packed BF16 logits (112 KB) are kept in
// shared memory for that pass (two blocks an SM), so each is read from memory once;
// longer or unaligned rows are read again (mostly from L2). The running max rises once
// per pack of 8 logits, not per logit, so the warps do not diverge on new maxima.
// The target logit is read before the block's first barrier, so probs may alias logits.
// The loss is log(sum) - (logit[target] - max): accurate even when probs[target]
// underflows. Backward, (probs - onehot) / N, is one elementwise pass in place or not,
// with the CPU's float operations in its order (_rn intrinsics: no contraction).
// mean_loss is one block: contiguous ranges summed in double, then a fixed tree.
// Shapes: N rows (B*T), V vocabulary.
#include <algorithm>
#include <cmath>

#include "cuda/ops/common.cuh"

namespace fp8scope::cuda {
namespace {

using namespace detail;

struct MaxSum {
    float m, s;  // running max and sum of exp(x - m)
};

__device__ __forceinline__ MaxSum combine(MaxSum a, MaxSum b) {
    const float m = fmaxf(a.m, b.m);
    if (m == -INFINITY) return {m, 0.0f};
    // Commutative term by term, so both lanes of a butterfly get the same bits.
    return {m, a.s * expf(a.m - m) + b.s * expf(b.m - m)};
}

// The row's (max, sum) from every thread's: butterflies in each warp, then the warps' in
// order (one barrier).
__device__ __forceinline__ MaxSum block_max_sum(MaxSum ms, MaxSum (&warp_part)[32]) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        ms = combine(ms, MaxSum{__shfl_xor_sync(0xffffffffu, ms.m, o), __shfl_xor_sync(0xffffffffu, ms.s, o)});
    if (threadIdx.x % 32 == 0) warp_part[threadIdx.x / 32] = ms;
    __syncthreads();
    MaxSum row = warp_part[0];
    for (int w = 1; w < int(blockDim.x / 32); ++w) row = combine(row, warp_part[w]);
    return row;
}

// kKeep (VEC = 8): the row's packs stay in shared memory between the passes (thread t
// takes packs t, t + blockDim.x, ... in both, so it reads back only what it wrote itself);
// else the second pass reads the row again. The running max rises once per VEC logits.
template <int VEC, bool kKeep>
__global__ void __launch_bounds__(1024, 2) softmax_ce_forward_kernel(bf16* probs, float* losses, const bf16* logits,
                                                                     const std::int32_t* targets, int V) {
    static_assert(!kKeep || VEC == kPack, "rows are kept as 16-byte packs");
    extern __shared__ uint4 kept[];
    __shared__ MaxSum warp_part[32];
    const std::int64_t n = blockIdx.x;
    const bf16* x = logits + n * V;
    bf16* p = probs + n * V;
    const int units = V / VEC;
    float target_logit = 0.0f;
    if (threadIdx.x == 0) target_logit = bf16_to_f32(x[targets[n]]);  // before any write to the row
    auto load_unit = [&](int u, float (&v)[VEC]) {
        if constexpr (kKeep) load<VEC>(reinterpret_cast<const bf16*>(kept + u), v);
        else load<VEC>(x + std::int64_t(u) * VEC, v);
    };

    MaxSum ms{-INFINITY, 0.0f};
    auto add_unit = [&](const float (&v)[VEC]) {
        float top = v[0];
#pragma unroll
        for (int k = 1; k < VEC; ++k) top = fmaxf(top, v[k]);
        if (top > ms.m) {
            ms.s *= expf(ms.m - top);
            ms.m = top;
        }
#pragma unroll
        for (int k = 0; k < VEC; ++k) ms.s += expf(v[k] - ms.m);
    };
    if constexpr (kKeep) {
        // The row is requested into L2 in one piece, and each thread has kDepth packs in
        // flight before it uses any: with one pack at a time the memory idles.
        constexpr int kDepth = 2;
        const uint4* row = reinterpret_cast<const uint4*>(x);
        if (threadIdx.x == 0) prefetch_l2(row, std::uint32_t(units) * sizeof(uint4));  // the whole row at once
        for (int u0 = threadIdx.x; u0 < units; u0 += kDepth * blockDim.x) {
            uint4 raw[kDepth];
#pragma unroll
            for (int j = 0; j < kDepth; ++j) {
                const int u = u0 + j * int(blockDim.x);
                if (u < units) raw[j] = row[u];
            }
#pragma unroll
            for (int j = 0; j < kDepth; ++j) {
                const int u = u0 + j * int(blockDim.x);
                if (u >= units) break;
                kept[u] = raw[j];
                float v[VEC];
                unpack(raw[j], v);
                add_unit(v);
            }
        }
    } else {
        for (int u = threadIdx.x; u < units; u += blockDim.x) {
            float v[VEC];
            load_unit(u, v);
            add_unit(v);
        }
    }
    const MaxSum row = block_max_sum(ms, warp_part);

    const float inv = 1.0f / row.s;
    for (int u = threadIdx.x; u < units; u += blockDim.x) {
        float v[VEC];
        load_unit(u, v);
#pragma unroll
        for (int k = 0; k < VEC; ++k) v[k] = expf(v[k] - row.m) * inv;
        store<VEC>(p + std::int64_t(u) * VEC, v);
    }
    if (threadIdx.x == 0) losses[n] = logf(row.s) - (target_logit - row.m);
}

// dlogits (N,V) = (probs - onehot) / N: thread per VEC elements of a row.
template <int VEC>
__global__ void softmax_ce_backward_kernel(bf16* dlogits, const bf16* probs, const std::int32_t* targets,
                                           std::int64_t N, int V, float inv_n) {
    const int units = V / VEC;
    const std::int64_t u = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (u >= N * units) return;
    const std::int64_t n = u / units;
    const int j = int(u % units) * VEC;
    const int t = targets[n];
    float v[VEC];
    load<VEC>(probs + n * V + j, v);
#pragma unroll
    for (int k = 0; k < VEC; ++k) {
        v[k] = __fmul_rn(v[k], inv_n);
        if (j + k == t) v[k] = __fsub_rn(v[k], inv_n);
    }
    store<VEC>(dlogits + n * V + j, v);
}

__global__ void mean_loss_kernel(float* mean, const float* losses, std::int64_t N) {
    __shared__ double scratch[32];
    const std::int64_t per = (N + blockDim.x - 1) / blockDim.x;
    const std::int64_t i0 = threadIdx.x * per;
    const std::int64_t i1 = i0 + per < N ? i0 + per : N;
    double s = 0.0;
    for (std::int64_t i = i0; i < i1; ++i) s += double(losses[i]);
    s = block_sum(s, scratch);
    if (threadIdx.x == 0) *mean = float(s / double(N));
}

}  // namespace

void softmax_ce_forward(bf16* probs, float* losses, const bf16* logits, const std::int32_t* targets, std::int64_t N,
                        int V, cudaStream_t stream) {
    if (N <= 0 || V <= 0) return;
    if (N > 0x7fffffff) throw std::invalid_argument("cuda softmax_ce_forward: too many rows");
    const bool packed = V % kPack == 0 && aligned16(probs) && aligned16(logits);
    const int units = packed ? V / kPack : V;
    const int threads = std::min(1024, std::max(32, round_up(units, 32)));
    constexpr int kRowSmem = 112 * 1024;  // two blocks an SM
    const std::size_t row_bytes = std::size_t(V) * sizeof(bf16);
    if (packed && row_bytes <= std::size_t(kRowSmem)) {
        // Every launch: the opt-in belongs to the current device.
        FP8SCOPE_CUDA_CHECK(cudaFuncSetAttribute(softmax_ce_forward_kernel<kPack, true>,
                                                 cudaFuncAttributeMaxDynamicSharedMemorySize, kRowSmem));
        softmax_ce_forward_kernel<kPack, true>
            <<<unsigned(N), threads, row_bytes, stream>>>(probs, losses, logits, targets, V);
    } else if (packed) {
        softmax_ce_forward_kernel<kPack, false><<<unsigned(N), threads, 0, stream>>>(probs, losses, logits, targets, V);
    } else {
        softmax_ce_forward_kernel<1, false><<<unsigned(N), threads, 0, stream>>>(probs, losses, logits, targets, V);
    }
    FP8SCOPE_CUDA_LAUNCHED();
}

void mean_loss(float* mean, const float* losses, std::int64_t N, cudaStream_t stream) {
    if (N <= 0) {
        FP8SCOPE_CUDA_CHECK(cudaMemsetAsync(mean, 0, sizeof(float), stream));
        return;
    }
    mean_loss_kernel<<<1, 1024, 0, stream>>>(mean, losses, N);
    FP8SCOPE_CUDA_LAUNCHED();
}

void softmax_ce_backward(bf16* dlogits, const bf16* probs, const std::int32_t* targets, std::int64_t N, int V,
                         cudaStream_t stream, std::int64_t mean_over) {
    if (N <= 0 || V <= 0) return;
    const float inv_n = 1.0f / float(mean_over > 0 ? mean_over : N);
    if (V % kPack == 0 && aligned16(dlogits) && aligned16(probs))
        softmax_ce_backward_kernel<kPack><<<blocks_for(N * (V / kPack), 256), 256, 0, stream>>>(dlogits, probs,
                                                                                                targets, N, V, inv_n);
    else
        softmax_ce_backward_kernel<1><<<blocks_for(N * V, 256), 256, 0, stream>>>(dlogits, probs, targets, N, V,
                                                                                  inv_n);
    FP8SCOPE_CUDA_LAUNCHED();
}

}  // namespace fp8scope::cuda
