// The test hook cast_bit_patterns: the element casts of the tile kernel applied to float32
// bit patterns, so a test can check all 2^32 of them against cast::cast_code on the CPU
// (the proof that the hardware conversion agrees wherever the kernels use it).
#include <algorithm>

#include "cuda/cast/launch.cuh"
#include "cuda/runtime/check.h"

namespace fp8scope::cuda {

namespace {

template <Format F>
__global__ void bit_patterns_kernel(std::uint32_t first, std::int64_t n, bool exact_only, std::uint8_t* codes) {
    const std::int64_t stride = std::int64_t(gridDim.x) * blockDim.x;
    for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
        const float y = qk::float_of(first + static_cast<std::uint32_t>(i));
        std::uint32_t over;
        // The tile kernel's rule: the hardware for runs of non-NaN |y| <= kFastMax.
        const bool fast = !exact_only && !qk::is_nan(y) && fabsf(y) <= qk::Fp8<F>::kFastMax;
        codes[i] = fast ? static_cast<std::uint8_t>(qk::cast2_fast<F>(y, 0.0f)) : cast::cast_code<F>(y, over);
    }
}

}  // namespace

void cast_bit_patterns(Format format, std::uint32_t first, std::int64_t n, bool exact_only, std::uint8_t* codes,
                       cudaStream_t stream) {
    if (n <= 0) return;
    const unsigned blocks = static_cast<unsigned>(std::min<std::int64_t>((n + 255) / 256, qk::sm_count() * 16));
    if (format == Format::E4M3) bit_patterns_kernel<Format::E4M3><<<blocks, 256, 0, stream>>>(first, n, exact_only, codes);
    else bit_patterns_kernel<Format::E5M2><<<blocks, 256, 0, stream>>>(first, n, exact_only, codes);
    FP8SCOPE_CUDA_LAUNCHED();
}

}  // namespace fp8scope::cuda
