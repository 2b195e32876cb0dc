// A grid-stride pass over x in 16-byte loads; an element whose exponent bits are all set is
// a NaN or Inf. Every thread that finds one folds its smallest index into *first with
// atomicMin, so the first element wins whatever the order the blocks run in. The pass
// reads x once and writes nothing while x is finite.
#include <algorithm>

#include "cuda/ops/common.cuh"
#include "cuda/ops/nonfinite.h"

namespace fp8scope::cuda {
namespace {

using namespace detail;

template <class Bits>
struct Exponent;
template <>
struct Exponent<std::uint32_t> {
    static constexpr std::uint32_t mask = 0x7f800000u;
};
template <>
struct Exponent<std::uint16_t> {
    static constexpr std::uint16_t mask = 0x7f80u;
};

template <class Bits>
__device__ __forceinline__ bool nonfinite(Bits b) {
    return (b & Exponent<Bits>::mask) == Exponent<Bits>::mask;
}

// `vector`: x is 16-byte aligned, read in packs of 16 / sizeof(Bits) values.
template <class Bits, bool vector>
__global__ void find_nonfinite_kernel(const Bits* x, std::int64_t n, unsigned long long tag,
                                      unsigned long long* first) {
    const unsigned long long seen = *first;
    if (seen != ~0ull && (seen >> 32) <= tag) return;  // an earlier site holds the first
    constexpr int kPer = vector ? int(16 / sizeof(Bits)) : 1;
    const std::int64_t packs = (n + kPer - 1) / kPer, stride = std::int64_t(gridDim.x) * blockDim.x;
    std::int64_t found = -1;
    for (std::int64_t p = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; p < packs && found < 0; p += stride) {
        const std::int64_t i0 = p * kPer;
        if (vector && i0 + kPer <= n) {
            union {
                uint4 v;
                Bits b[kPer];
            } u;
            u.v = reinterpret_cast<const uint4*>(x)[p];
            for (int k = 0; k < kPer; ++k)
                if (nonfinite(u.b[k])) {
                    found = i0 + k;
                    break;
                }
        } else {
            for (std::int64_t i = i0; i < n && i < i0 + kPer; ++i)
                if (nonfinite(x[i])) {
                    found = i;
                    break;
                }
        }
    }
    if (found < 0) return;
    const unsigned long long index = found < 0xffffffffll ? (unsigned long long)found : 0xffffffffull;
    atomicMin(first, tag << 32 | index);
}

template <class Bits>
void launch(const Bits* x, std::int64_t n, std::uint32_t tag, unsigned long long* first, cudaStream_t stream) {
    if (n <= 0) return;
    const bool vector = aligned16(x);
    const std::int64_t packs = vector ? (n * std::int64_t(sizeof(Bits)) + 15) / 16 : n;
    // A few waves of blocks: each thread strides through the tensor, so a large one is
    // read at full bandwidth without a block per 256 packs.
    const unsigned blocks = std::min(blocks_for(packs, 256), 2048u);
    if (vector) find_nonfinite_kernel<Bits, true><<<blocks, 256, 0, stream>>>(x, n, tag, first);
    else find_nonfinite_kernel<Bits, false><<<blocks, 256, 0, stream>>>(x, n, tag, first);
    FP8SCOPE_CUDA_LAUNCHED();
}

}  // namespace

void find_nonfinite(const void* x, bool bf16, std::int64_t n, std::uint32_t tag, unsigned long long* first,
                    cudaStream_t stream) {
    if (bf16) launch(static_cast<const std::uint16_t*>(x), n, tag, first, stream);
    else launch(static_cast<const std::uint32_t*>(x), n, tag, first, stream);
}

}  // namespace fp8scope::cuda
