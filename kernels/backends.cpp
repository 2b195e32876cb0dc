#include "backends.h"

#include <stdexcept>
#include <string>

#include "cpu/cpu_backend.h"
#include "comm/tcp_communicator.h"
#ifdef FP8SCOPE_HAVE_CUDA
#include "cuda/cuda_backend.h"
#include "cuda/nccl_communicator.h"
#include "cuda/runtime/devices.h"
#endif

namespace fp8scope {

std::unique_ptr<Backend> make_backend(const std::string& device, int threads, [[maybe_unused]] int ordinal) {
    if (device == "cpu") return std::make_unique<CpuBackend>(threads);
    if (device == "cuda") {
#ifdef FP8SCOPE_HAVE_CUDA
        std::string why;
        const auto list = cuda::devices(&why);
        if (list.empty()) throw std::runtime_error("device cuda: no usable CUDA device (" + why + ")");
        if (ordinal < 0 || ordinal >= static_cast<int>(list.size()))
            throw std::runtime_error("device cuda: GPU " + std::to_string(ordinal) + " asked for (LOCAL_RANK?), " +
                                     std::to_string(list.size()) + " usable on this machine");
        const auto& d = list[static_cast<std::size_t>(ordinal)];
        try {
            return std::make_unique<CudaBackend>(d.index, threads);
        } catch (const std::exception& e) {
            throw std::runtime_error("device cuda: cannot use " + d.name + ": " + e.what());
        }
#else
        throw std::runtime_error("device cuda: this build has no CUDA backend (nvcc was not found when it was configured)");
#endif
    }
    throw std::invalid_argument("device '" + device + "' is not one of cpu, cuda");
}

std::unique_ptr<Communicator> make_communicator(Backend& backend, Rendezvous& rendezvous) {
#ifdef FP8SCOPE_HAVE_CUDA
    if (auto* cuda = dynamic_cast<CudaBackend*>(&backend)) return std::make_unique<NcclCommunicator>(*cuda, rendezvous);
#endif
    if (backend.device() != Device::CPU)
        throw std::runtime_error(std::string("no communicator for device ") + device_name(backend.device()));
    return std::make_unique<TcpCommunicator>(rendezvous);
}

std::vector<std::string> built_devices() {
#ifdef FP8SCOPE_HAVE_CUDA
    return {"cpu", "cuda"};
#else
    return {"cpu"};
#endif
}

}  // namespace fp8scope
