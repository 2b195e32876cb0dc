// GEMM algorithm choice by timing (gemm_tuning.h).
#include "cuda/gemm_tuning.h"

#include <cuda_runtime.h>

#include <cstdint>
#include <limits>

#include "cuda/check.h"

namespace fp8scope::cuda {
namespace {

constexpr int kTimedRuns = 3;

// A 64-bit digest of the output's 16-bit words (BF16 and float32 outputs are a whole
// number of them), position-mixed so that moved or swapped values change it too.
__global__ void digest_kernel(const std::uint16_t* words, std::size_t n, unsigned long long* digest) {
    unsigned long long h = 0;
    const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
    for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += stride) {
        unsigned long long z = (static_cast<unsigned long long>(words[i]) << 32 | i) + 0x9E3779B97F4A7C15ull;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        h += z ^ (z >> 31);
    }
    for (int o = 16; o > 0; o >>= 1) h += __shfl_down_sync(0xffffffffu, h, o);
    if (threadIdx.x % 32 == 0) atomicAdd(digest, h);
}

// Device memory and events of the trials, released on every path.
struct Scratch {
    unsigned long long* digest = nullptr;
    cudaEvent_t start = nullptr, stop = nullptr;
    Scratch() {
        FP8SCOPE_CUDA_CHECK(cudaMalloc(&digest, sizeof *digest));
        FP8SCOPE_CUDA_CHECK(cudaEventCreate(&start));
        FP8SCOPE_CUDA_CHECK(cudaEventCreate(&stop));
    }
    ~Scratch() {
        cudaEventDestroy(stop);
        cudaEventDestroy(start);
        cudaFree(digest);
    }
};

unsigned long long digest_of(const GemmTrial& t, Scratch& s) {
    FP8SCOPE_CUDA_CHECK(cudaMemsetAsync(s.digest, 0, sizeof *s.digest, t.stream));
    digest_kernel<<<264, 256, 0, t.stream>>>(static_cast<const std::uint16_t*>(t.out), t.out_bytes / 2, s.digest);
    FP8SCOPE_CUDA_LAUNCHED();
    unsigned long long h = 0;
    FP8SCOPE_CUDA_CHECK(cudaMemcpyAsync(&h, s.digest, sizeof h, cudaMemcpyDeviceToHost, t.stream));
    FP8SCOPE_CUDA_CHECK(cudaStreamSynchronize(t.stream));
    return h;
}

}  // namespace

std::size_t fastest_same_bits(const std::vector<cublasLtMatmulAlgo_t>& offered, const GemmTrial& t) {
    Scratch s;
    std::size_t best = 0;
    float best_ms = std::numeric_limits<float>::infinity();
    unsigned long long first = 0;
    for (std::size_t i = 0; i < offered.size(); ++i) {
        t.run(offered[i]);  // warm-up, and the result to compare
        const unsigned long long h = digest_of(t, s);
        if (i == 0) first = h;
        else if (h != first) continue;
        FP8SCOPE_CUDA_CHECK(cudaEventRecord(s.start, t.stream));
        for (int r = 0; r < kTimedRuns; ++r) t.run(offered[i]);
        FP8SCOPE_CUDA_CHECK(cudaEventRecord(s.stop, t.stream));
        FP8SCOPE_CUDA_CHECK(cudaEventSynchronize(s.stop));
        float ms = 0;
        FP8SCOPE_CUDA_CHECK(cudaEventElapsedTime(&ms, s.start, s.stop));
        if (ms < best_ms) best_ms = ms, best = i;
    }
    return best;
}

}  // namespace fp8scope::cuda
