// Error checks for CUDA runtime and cuBLASLt calls: a failure throws CudaError naming
// the call, the file and line and the library's message, so the engine reports it and
// the run ends cleanly instead of aborting.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

namespace fp8scope::cuda {

class CudaError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

[[noreturn]] inline void fail(const char* call, const char* file, int line, const std::string& what) {
    throw CudaError(std::string(call) + " failed at " + file + ":" + std::to_string(line) + ": " + what);
}

}  // namespace fp8scope::cuda

#define FP8SCOPE_CUDA_CHECK(call)                                                                       \
    do {                                                                                                \
        cudaError_t fp8scope_err_ = (call);                                                             \
        if (fp8scope_err_ != cudaSuccess)                                                               \
            ::fp8scope::cuda::fail(#call, __FILE__, __LINE__, cudaGetErrorString(fp8scope_err_));      \
    } while (0)

#define FP8SCOPE_CUBLAS_CHECK(call)                                                                     \
    do {                                                                                                \
        cublasStatus_t fp8scope_st_ = (call);                                                           \
        if (fp8scope_st_ != CUBLAS_STATUS_SUCCESS)                                                      \
            ::fp8scope::cuda::fail(#call, __FILE__, __LINE__, cublasLtGetStatusString(fp8scope_st_));  \
    } while (0)

// After a kernel launch: launch configuration errors surface here, not at the next sync.
#define FP8SCOPE_CUDA_LAUNCHED() FP8SCOPE_CUDA_CHECK(cudaGetLastError())
