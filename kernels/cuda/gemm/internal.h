// What gemm.cu, scales.cu and the GEMM benchmark share beyond gemm.h: the one-launch
// preparation of a GEMM's scale grids and bias, and cuBLASLt's algorithm in words. Host
// code; includes cuBLASLt.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

#include "cuda/gemm/gemm.h"

namespace fp8scope::cuda::detail {

constexpr std::int64_t pad4(std::int64_t x) { return (x + 3) / 4 * 4; }
constexpr std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// One scale grid to bring into cuBLASLt's layout (gemm.h): our row-major grid `src` of an
// operand (rows, k) under `scaling` (Tile1x128 or Block128) into `dst`.
struct ScaleJob {
    float* dst = nullptr;
    const float* src = nullptr;
    GemmScaling scaling = GemmScaling::None;  // None: no job
    std::int64_t rows = 0, k = 0;
};

// The bias (n) float32 staged as the type cuBLASLt's epilogue reads.
struct BiasJob {
    void* dst = nullptr;  // null: no job
    const float* src = nullptr;
    std::int64_t n = 0;
    bool to_bf16 = false;
};

// The device {alpha, beta} of a GEMM in cuBLASLt's device pointer mode: alpha = a * b
// (float32; a null factor is 1).
struct AlphaJob {
    float* dst = nullptr;  // null: no job
    const float *a = nullptr, *b = nullptr;
    float beta = 0.0f;
};

// Everything a GEMM needs before cuBLASLt runs, in a single kernel launch on `stream`
// (nothing is launched when there is no job).
void prepare_gemm_inputs(const ScaleJob& a, const ScaleJob& b, const BiasJob& bias, cudaStream_t stream,
                         const AlphaJob& alpha = {});

// "algo 66 tile 256x128 stages 4 splitK 1 swizzle 0 cluster 2x1x1 ...": the configuration
// the heuristic chose, to compare two algorithm choices.
std::string describe_algo(const cublasLtMatmulAlgo_t& algo);

cudaDataType_t cuda_data_type(DType t);
// cuBLASLt's scale mode of an FP8 operand.
cublasLtMatmulMatrixScale_t cublas_scale_mode(GemmScaling s);

}  // namespace fp8scope::cuda::detail
