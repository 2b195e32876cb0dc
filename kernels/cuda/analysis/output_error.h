// The output error on the GPU (AnalysisOps::output_error): sum reference^2, sum
// (out - reference)^2 in double and max |out - reference| over two tensors of one type
// (BF16 or F32), reduced on the device; only the three figures cross to the host.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "backend/tensor_desc.h"

namespace fp8scope::cuda {

// What output_error_sums() leaves in device memory (zeroed by it first).
struct OutputErrorSums {
    double signal = 0, error = 0;
    unsigned max_abs_bits = 0;  // float bits of max |d| (non-negative floats order as integers)
};

// Enqueues the reduction of `out` against `reference`, n elements each, into `sums`.
void output_error_sums(const void* out, const void* reference, DType dtype, std::int64_t n, OutputErrorSums* sums,
                       cudaStream_t stream);

}  // namespace fp8scope::cuda
