// The CUDA backend's NonFiniteOps: the scan (cuda/ops/nonfinite.h) on the stream, and the
// record's word copied into pinned memory behind the step's work, so it lands with the
// next wait for the stream (the loss or gradient norm read back) instead of a wait of its own.
#include <stdexcept>
#include <string>

#include "cuda/cuda_backend.h"
#include "cuda/cuda_backend_lane.h"
#include "cuda/ops/nonfinite.h"
#include "cuda/runtime/check.h"

namespace fp8scope {

void CudaBackend::find_nonfinite(const TensorDesc& x, std::uint32_t tag, std::uint64_t* first) {
    if (x.dtype != DType::F32 && x.dtype != DType::BF16)
        throw std::logic_error(std::string("cuda find_nonfinite: values are ") + dtype_name(x.dtype));
    static_assert(sizeof(unsigned long long) == sizeof(std::uint64_t));
    cuda::find_nonfinite(x.data, x.dtype == DType::BF16, x.numel(), tag, reinterpret_cast<unsigned long long*>(first),
                         stream());
}

void CudaBackend::stage_nonfinite(const std::uint64_t* first) {
    Lane& l = lane();
    if (!l.nonfinite_host) {
        FP8SCOPE_CUDA_CHECK(cudaMallocHost(&l.nonfinite_host, sizeof(std::uint64_t)));
        *l.nonfinite_host = kNoNonFinite;
    }
    FP8SCOPE_CUDA_CHECK(
        cudaMemcpyAsync(l.nonfinite_host, first, sizeof(std::uint64_t), cudaMemcpyDeviceToHost, l.stream));
}

std::uint64_t CudaBackend::staged_nonfinite() const {
    const Lane& l = lane();
    return l.nonfinite_host ? *l.nonfinite_host : kNoNonFinite;
}

}  // namespace fp8scope
