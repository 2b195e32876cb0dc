// Shared by the CUDA tests: skip (never fail) where there is no GPU, and device buffers
// that free themselves.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <string>
#include <vector>

#include "cuda/runtime/check.h"
#include "cuda/runtime/devices.h"

namespace fp8scope::testing {

// The reason there is no usable GPU, or "" when there is one.
inline std::string no_gpu_reason() {
    std::string why;
    auto list = cuda::devices(&why);
    return list.empty() ? why : std::string();
}

}  // namespace fp8scope::testing

// First statement of every GPU test.
#define FP8SCOPE_REQUIRE_GPU()                                                              \
    do {                                                                                    \
        static const std::string fp8scope_why_ = ::fp8scope::testing::no_gpu_reason();      \
        if (!fp8scope_why_.empty()) GTEST_SKIP() << "no CUDA device: " << fp8scope_why_;    \
    } while (0)

namespace fp8scope::testing {

template <class T>
class GpuBuffer {
public:
    explicit GpuBuffer(std::size_t n = 0) : n_(n) {
        if (n) FP8SCOPE_CUDA_CHECK(cudaMalloc(&p_, n * sizeof(T)));
    }
    explicit GpuBuffer(const std::vector<T>& host) : GpuBuffer(host.size()) { upload(host); }
    ~GpuBuffer() { if (p_) cudaFree(p_); }
    GpuBuffer(const GpuBuffer&) = delete;
    GpuBuffer& operator=(const GpuBuffer&) = delete;

    T* get() const { return p_; }
    std::size_t size() const { return n_; }
    void upload(const std::vector<T>& host) {
        FP8SCOPE_CUDA_CHECK(cudaMemcpy(p_, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
    }
    std::vector<T> download() const {
        std::vector<T> host(n_);
        if (n_) FP8SCOPE_CUDA_CHECK(cudaMemcpy(host.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost));
        return host;
    }

private:
    T* p_ = nullptr;
    std::size_t n_ = 0;
};

}  // namespace fp8scope::testing
