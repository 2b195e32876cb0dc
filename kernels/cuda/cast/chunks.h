// The FP8 chunks of gradient sums on the GPU (fp8/chunks.h has the layout and the rules):
// the launchers behind CudaBackend::quantize_chunks and dequantize_sum, bit for bit the
// CPU's (kernels/cpu/chunks.h): each chunk's amax comes from the cast's amax kernel, its
// scale and codes from the rules of core/fp8/cast_rules.h, as the CPU. Plain C++, so the
// backend and the tests include it without nvcc. Asynchronous on `stream`; device
// pointers only.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "fp8/chunks.h"
#include "fp8/format.h"

namespace fp8scope::cuda {

void quantize_chunks(void* slots, const float* x, const ChunkLayout& layout, Format format, cudaStream_t stream);
void dequantize_sum(float* out, const void* slots, std::int64_t slot_bytes, int count, std::int64_t n, Format format,
                    cudaStream_t stream);

}  // namespace fp8scope::cuda
