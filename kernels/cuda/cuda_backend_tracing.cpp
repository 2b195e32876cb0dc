// The CUDA backend's kernel timing: op scopes as NVTX ranges (Nsight Systems shows the
// engine's ops) and as CUPTI external correlation ids (kernel_tracer.h).
#include <nvtx3/nvToolsExt.h>

#include "cuda/cuda_backend.h"
#include "cuda/runtime/check.h"
#include "cuda/runtime/kernel_tracer.h"

namespace fp8scope {

void CudaBackend::begin_op(std::uint64_t scope, const char* name) {
    nvtxRangePushA(name);
    cuda::KernelTracer::instance().begin_scope(scope);
}

void CudaBackend::end_op() {
    cuda::KernelTracer::instance().end_scope();
    nvtxRangePop();
}

std::string CudaBackend::trace_kernels(KernelListener* listener) {
    if (!listener) {
        synchronize();  // the last kernels' records, before the listener goes
        cuda::KernelTracer::instance().stop();
        return "";
    }
    return cuda::KernelTracer::instance().start(listener);
}

void CudaBackend::flush_kernels() {
    if (!cuda::KernelTracer::instance().active()) return;
    FP8SCOPE_CUDA_CHECK(cudaStreamSynchronize(stream()));
    cuda::KernelTracer::instance().flush();
}

std::int64_t CudaBackend::dropped_kernel_records() const { return cuda::KernelTracer::instance().dropped(); }

}  // namespace fp8scope
