// The CUDA backend's NonFiniteOps: the scan (cuda/ops/nonfinite.h) on the stream, and the
// record's word copied into pinned memory behind the step's work, so it lands with the
// next wait for the stream (the loss or gradient norm read back) instead of a wait of its own.
#include <stdexcept>
#include <string>

#include "cuda/cuda_backend.h"
#include "cuda/ops/nonfinite.h"
#include "cuda/runtime/check.h"

namespace fp8scope {

void CudaBackend::find_nonfinite(const TensorDesc& x, std::uint32_t tag, std::uint64_t* first) {
    if (x.dtype != DType::F32 && x.dtype != DType::BF16)
        throw std::logic_error(std::string("cuda find_nonfinite: values are ") + dtype_name(x.dtype));
    static_assert(sizeof(unsigned long long) == sizeof(std::uint64_t));
    cuda::find_nonfinite(x.data, x.dtype == DType::BF16, x.numel(), tag, reinterpret_cast<unsigned long long*>(first),
                         stream_);
}

void CudaBackend::stage_nonfinite(const std::uint64_t* first) {
    if (!nonfinite_host_) {
        FP8SCOPE_CUDA_CHECK(cudaMallocHost(&nonfinite_host_, sizeof(std::uint64_t)));
        *nonfinite_host_ = kNoNonFinite;
    }
    FP8SCOPE_CUDA_CHECK(
        cudaMemcpyAsync(nonfinite_host_, first, sizeof(std::uint64_t), cudaMemcpyDeviceToHost, stream_));
}

std::uint64_t CudaBackend::staged_nonfinite() const { return nonfinite_host_ ? *nonfinite_host_ : kNoNonFinite; }

}  // namespace fp8scope
