// Small kernels of the CUDA backend that no op family owns: the float32 -> BF16 copy of a
// weight that a BF16 GEMM reads (the unquantized linears and the output head), and the
// way back (gradient sums carried in BF16).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace fp8scope::cuda {

// out (n) = in rounded to the nearest BF16 (ties to even; NaN stays NaN), as bits.
void f32_to_bf16(std::uint16_t* out, const float* in, std::int64_t n, cudaStream_t stream);
// out (n) = in widened to float32 (exact).
void bf16_to_f32(float* out, const std::uint16_t* in, std::int64_t n, cudaStream_t stream);

}  // namespace fp8scope::cuda
