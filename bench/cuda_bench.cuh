// What the GPU benchmarks share: synthetic data made on the device and event timing.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>

#include "cuda/runtime/check.h"

namespace fp8scope::bench {

// N(0,1) from a hash of the index (Box-Muller), times 50 for one element in 1000; a
// value that comes out 0 becomes 0.5 (the bench never feeds zeros).
static __global__ void fill_normal(void* x, bool bf16, std::int64_t n, std::uint32_t seed) {
    const std::int64_t stride = std::int64_t(gridDim.x) * blockDim.x;
    for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
        std::uint32_t h = std::uint32_t(i) * 0x9E3779B1u ^ seed ^ std::uint32_t(i >> 32) * 0x85EBCA77u;
        h ^= h >> 15, h *= 0x2C1B3C6Du, h ^= h >> 12, h *= 0x297A2D39u, h ^= h >> 15;
        const std::uint32_t h2 = h * 0x9E3779B1u + 0x7F4A7C15u;
        const float u1 = (float(h >> 8) + 1.0f) * (1.0f / 16777217.0f), u2 = float(h2 >> 8) * (1.0f / 16777216.0f);
        float v = sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2);
        if ((h2 & 1023u) == 7u) v *= 50.0f;
        if (v == 0.0f) v = 0.5f;
        if (bf16) {
            const std::uint32_t b = __float_as_uint(v);
            static_cast<std::uint16_t*>(x)[i] = std::uint16_t((b + 0x7FFFu + ((b >> 16) & 1u)) >> 16);
        } else {
            static_cast<float*>(x)[i] = v;
        }
    }
}

// Median milliseconds of `runs` calls of f on `stream`, after 3 warm-up calls. The calls
// are queued back to back with an event between each two and one wait at the end, so the
// figure is the GPU's time for f as inside a training step, where the host runs ahead:
// timed one at a time from an idle queue, every figure would also hold the host's launch
// latency (some 5-10 us per call, more than the kernels' own gaps).
inline double median_ms(cudaStream_t stream, int runs, const std::function<void()>& f) {
    for (int i = 0; i < 3; ++i) f();
    FP8SCOPE_CUDA_CHECK(cudaStreamSynchronize(stream));
    std::vector<cudaEvent_t> ev(std::size_t(runs) + 1);
    for (auto& e : ev) FP8SCOPE_CUDA_CHECK(cudaEventCreate(&e));
    FP8SCOPE_CUDA_CHECK(cudaEventRecord(ev[0], stream));
    for (int i = 0; i < runs; ++i) {
        f();
        FP8SCOPE_CUDA_CHECK(cudaEventRecord(ev[std::size_t(i) + 1], stream));
    }
    FP8SCOPE_CUDA_CHECK(cudaEventSynchronize(ev.back()));
    std::vector<double> ms;
    for (int i = 0; i < runs; ++i) {
        float t = 0;
        FP8SCOPE_CUDA_CHECK(cudaEventElapsedTime(&t, ev[std::size_t(i)], ev[std::size_t(i) + 1]));
        ms.push_back(t);
    }
    for (auto& e : ev) FP8SCOPE_CUDA_CHECK(cudaEventDestroy(e));
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
}

// `--rows R --cols C --runs N` (runs at least `min_runs`) into the given defaults.
inline void shape_options(int argc, char** argv, std::int64_t& rows, std::int64_t& cols, int& runs, int min_runs) {
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!std::strcmp(argv[i], "--rows")) rows = std::atoll(argv[i + 1]);
        else if (!std::strcmp(argv[i], "--cols")) cols = std::atoll(argv[i + 1]);
        else if (!std::strcmp(argv[i], "--runs")) runs = std::max(min_runs, std::atoi(argv[i + 1]));
    }
}

}  // namespace fp8scope::bench
