// FP8 chunk kernels (chunks.h). A thread takes 4 elements: one 16-byte load of float32
// (when the chunk is aligned) and one 4-byte store of codes, or one 4-byte load of codes
// per slot and one 16-byte store of sums. Code arrays are padded to 16 bytes in their
// slots, so the 4-byte accesses past a chunk's end stay in its slot (the extra codes are
// zero when written and ignored when read).
#include <algorithm>
#include <cstddef>

#include "cuda/cast/chunks.h"
#include "cuda/cast/launch.cuh"
#include "cuda/ops/common.cuh"
#include "cuda/runtime/check.h"

namespace fp8scope::cuda {

namespace {

using detail::aligned16;

constexpr int kThreads = 256;

unsigned blocks_for(std::int64_t n) {
    const std::int64_t want = std::max<std::int64_t>(1, (n + 4 * kThreads - 1) / (4 * kThreads));
    return static_cast<unsigned>(std::min<std::int64_t>(want, std::int64_t(qk::sm_count()) * 8));
}

// The CPU's chunk_code (kernels/cpu/chunks.cpp): NaN and Inf to the NaN code with their
// sign, finite x * s through the exact cast.
template <Format F>
__device__ __forceinline__ std::uint32_t chunk_code(float x, float s) {
    const std::uint32_t u = __float_as_uint(x);
    if ((u & qk::kInfBits) == qk::kInfBits) return qk::Fp8<F>::kNaNCode | ((u >> 24) & 0x80u);
    std::uint32_t over;
    return cast::cast_code<F>(qk::mul_rn(x, s), over);
}

// Chunk blockIdx.y of x into its slot; the header's amax is in place already.
template <Format F>
__global__ void __launch_bounds__(kThreads) quantize_chunks_kernel(std::uint8_t* slots, const float* x,
                                                                   std::int64_t n, std::int64_t chunk,
                                                                   std::int64_t slot_bytes, bool vec) {
    const std::int64_t k = blockIdx.y;
    const std::int64_t begin = k * chunk < n ? k * chunk : n;
    const std::int64_t size = (begin + chunk < n ? begin + chunk : n) - begin;
    ChunkHeader* h = reinterpret_cast<ChunkHeader*>(slots + k * slot_bytes);
    const float s = qk::compute_scale(h->amax, F, 0.0f, true);
    if (blockIdx.x == 0 && threadIdx.x == 0) h->scale_inv = qk::div_rn(1.0f, s);
    const float* xk = x + begin;
    std::uint32_t* codes = reinterpret_cast<std::uint32_t*>(h + 1);
    const std::int64_t stride = std::int64_t(gridDim.x) * blockDim.x;
    for (std::int64_t t = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; 4 * t < size; t += stride) {
        const std::int64_t i = 4 * t;
        float v[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        if (vec && i + 4 <= size) {
            const float4 q = *reinterpret_cast<const float4*>(xk + i);
            v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;
        } else {
            for (int j = 0; j < 4 && i + j < size; ++j) v[j] = xk[i + j];
        }
        std::uint32_t w = 0;
#pragma unroll
        for (int j = 0; j < 4; ++j) w |= (i + j < size ? chunk_code<F>(v[j], s) : 0u) << (8 * j);
        codes[t] = w;
    }
}

// out (n) = sum over k < count of slot k's values, in the order of k.
template <Format F>
__global__ void __launch_bounds__(kThreads) dequantize_sum_kernel(float* out, const std::uint8_t* slots,
                                                                  std::int64_t slot_bytes, int count, std::int64_t n,
                                                                  bool vec) {
    const std::int64_t stride = std::int64_t(gridDim.x) * blockDim.x;
    for (std::int64_t t = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; 4 * t < n; t += stride) {
        const std::int64_t i = 4 * t;
        float acc[4];
        for (int k = 0; k < count; ++k) {
            const ChunkHeader* h = reinterpret_cast<const ChunkHeader*>(slots + k * slot_bytes);
            const std::uint32_t w = reinterpret_cast<const std::uint32_t*>(h + 1)[t];
            const float2 lo = qk::decode2<F>(w), hi = qk::decode2<F>(w >> 16);
            const float v[4] = {lo.x, lo.y, hi.x, hi.y};
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                const float d = qk::mul_rn(v[j], h->scale_inv);
                acc[j] = k == 0 ? d : qk::add_rn(acc[j], d);
            }
        }
        if (vec && i + 4 <= n) {
            *reinterpret_cast<float4*>(out + i) = make_float4(acc[0], acc[1], acc[2], acc[3]);
        } else {
            for (int j = 0; j < 4 && i + j < n; ++j) out[i + j] = acc[j];
        }
    }
}

}  // namespace

void quantize_chunks(void* slots, const float* x, const ChunkLayout& layout, Format format, cudaStream_t stream) {
    if (layout.chunks <= 0) return;
    auto* base = static_cast<std::uint8_t*>(slots);
    const std::int64_t slot_bytes = layout.slot_bytes(), chunk = layout.chunk();
    // Each header's amax: zeroed, then the cast's amax kernel (NaN ignored, Inf included).
    FP8SCOPE_CUDA_CHECK(cudaMemset2DAsync(base, std::size_t(slot_bytes), 0, sizeof(ChunkHeader),
                                          std::size_t(layout.chunks), stream));
    for (int k = 0; k < layout.chunks; ++k) {
        auto* amax = reinterpret_cast<std::uint32_t*>(base + k * slot_bytes + offsetof(ChunkHeader, amax));
        qk::launch_tensor_amax(CastInput{x + layout.begin(k), DType::F32, 1, layout.size(k)}, amax, stream);
    }
    const dim3 grid(blocks_for(chunk), unsigned(layout.chunks));
    const bool vec = aligned16(x) && chunk % 4 == 0;
    if (format == Format::E4M3)
        quantize_chunks_kernel<Format::E4M3><<<grid, kThreads, 0, stream>>>(base, x, layout.n, chunk, slot_bytes, vec);
    else
        quantize_chunks_kernel<Format::E5M2><<<grid, kThreads, 0, stream>>>(base, x, layout.n, chunk, slot_bytes, vec);
    FP8SCOPE_CUDA_LAUNCHED();
}

void dequantize_sum(float* out, const void* slots, std::int64_t slot_bytes, int count, std::int64_t n, Format format,
                    cudaStream_t stream) {
    if (n <= 0 || count <= 0) return;
    const auto* base = static_cast<const std::uint8_t*>(slots);
    if (format == Format::E4M3)
        dequantize_sum_kernel<Format::E4M3><<<blocks_for(n), kThreads, 0, stream>>>(out, base, slot_bytes, count, n,
                                                                                     aligned16(out));
    else
        dequantize_sum_kernel<Format::E5M2><<<blocks_for(n), kThreads, 0, stream>>>(out, base, slot_bytes, count, n,
                                                                                     aligned16(out));
    FP8SCOPE_CUDA_LAUNCHED();
}

}  // namespace fp8scope::cuda
