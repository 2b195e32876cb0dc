// CudaBackend::output_error: the reduction of cuda/analysis/output_error.h on the stream,
// then one copy of its three figures back (a capture step's wait, as analyze()'s).
#include <cstring>
#include <stdexcept>
#include <string>

#include "cuda/analysis/output_error.h"
#include "cuda/cuda_backend.h"
#include "cuda/cuda_backend_lane.h"
#include "cuda/runtime/check.h"

namespace fp8scope {

OutputError CudaBackend::output_error(const TensorDesc& out, const TensorDesc& reference) {
    if (out.rows != reference.rows || out.cols != reference.cols || out.dtype != reference.dtype ||
        out.transposed != reference.transposed)
        throw std::logic_error("cuda output_error: output " + std::to_string(out.rows) + "x" +
                               std::to_string(out.cols) + " and reference " + std::to_string(reference.rows) +
                               "x" + std::to_string(reference.cols) + " differ in shape or type");
    auto* sums = lane().output_error_sums->grow_as<cuda::OutputErrorSums>(1);
    cuda::output_error_sums(out.data, reference.data, out.dtype, out.numel(), sums, stream());
    cuda::OutputErrorSums host;
    FP8SCOPE_CUDA_CHECK(cudaMemcpyAsync(&host, sums, sizeof host, cudaMemcpyDeviceToHost, stream()));
    FP8SCOPE_CUDA_CHECK(cudaStreamSynchronize(stream()));
    OutputError e;
    e.signal = host.signal;
    e.error = host.error;
    std::memcpy(&e.max_abs, &host.max_abs_bits, sizeof e.max_abs);
    e.count = out.numel();
    return e;
}

}  // namespace fp8scope
