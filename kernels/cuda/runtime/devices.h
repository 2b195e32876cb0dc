// The CUDA devices this process can use, for `fp8scope-engine devices` and GPU tests.
#pragma once

#include <string>
#include <vector>

namespace fp8scope::cuda {

struct DeviceInfo {
    int index = 0;
    std::string name;
    int major = 0, minor = 0;  // compute capability
    std::size_t memory_bytes = 0;
    int multiprocessors = 0;
};

// Empty when there is no driver or no device; `why` then says what the runtime answered.
std::vector<DeviceInfo> devices(std::string* why = nullptr);
// FP8 tensor cores: compute capability 8.9 (Ada) and 9.0+ (Hopper, Blackwell).
inline bool has_fp8_tensor_cores(const DeviceInfo& d) { return d.major > 8 || (d.major == 8 && d.minor >= 9); }

}  // namespace fp8scope::cuda
