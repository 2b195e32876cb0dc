// The choice among the algorithms cuBLASLt's heuristic offers for one GEMM: each is run and
// timed on the call's own operands, and the fastest whose result has the same bits as the
// heuristic's first choice wins, so a run's numbers never depend on timing (on an H200
// every algorithm offered for the engine's GEMMs gave the same bits; bench_cuda_gemm_layouts
// checks). Costs a few milliseconds per problem, once.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <functional>
#include <vector>

namespace fp8scope::cuda {

struct GemmTrial {
    std::function<void(const cublasLtMatmulAlgo_t&)> run;  // enqueues the GEMM with an algorithm
    const void* out = nullptr;                             // what it writes (overwrites)
    std::size_t out_bytes = 0;
    cudaStream_t stream = nullptr;
};

// The index into `offered` (non-empty) of the algorithm to keep; waits for the stream.
std::size_t fastest_same_bits(const std::vector<cublasLtMatmulAlgo_t>& offered, const GemmTrial& trial);

}  // namespace fp8scope::cuda
