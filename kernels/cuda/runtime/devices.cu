#include "cuda/runtime/devices.h"

#include <cuda_runtime.h>

namespace fp8scope::cuda {

std::vector<DeviceInfo> devices(std::string* why) {
    std::vector<DeviceInfo> out;
    int count = 0;
    cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess) {
        if (why) *why = cudaGetErrorString(err);
        return out;
    }
    for (int i = 0; i < count; ++i) {
        cudaDeviceProp p{};
        if (cudaGetDeviceProperties(&p, i) != cudaSuccess) continue;
        out.push_back({i, p.name, p.major, p.minor, p.totalGlobalMem, p.multiProcessorCount});
    }
    if (out.empty() && why) *why = "no CUDA device";
    return out;
}

}  // namespace fp8scope::cuda
