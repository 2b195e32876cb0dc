#include "backends.h"

#include <stdexcept>

#include "cpu/cpu_backend.h"

namespace fp8scope {

std::unique_ptr<Backend> make_backend(const std::string& device, int threads) {
    if (device == "cpu") return std::make_unique<CpuBackend>(threads);
    if (device == "cuda") {
#ifdef FP8SCOPE_HAVE_CUDA
        throw std::runtime_error("device cuda: the CUDA backend is not finished in this build");
#else
        throw std::runtime_error("device cuda: this build has no CUDA backend (nvcc was not found when it was configured)");
#endif
    }
    throw std::invalid_argument("device '" + device + "' is not one of cpu, cuda");
}

std::vector<std::string> built_devices() {
#ifdef FP8SCOPE_HAVE_CUDA
    return {"cpu", "cuda"};
#else
    return {"cpu"};
#endif
}

}  // namespace fp8scope
