// `fp8scope-engine devices`: the devices this build can train on. The CPU first (the
// line its backend describes itself with), then each CUDA device with what matters for
// FP8: compute capability, memory, FP8 tensor cores, MXFP8 tensor cores (Blackwell,
// sm_100 and later; on earlier GPUs the CUDA backend emulates MXFP8 GEMMs in BF16) and
// the cuBLASLt that runs the GEMMs. Exit status 0: the CPU is always there.
#include <cstdio>

#include "commands.h"
#include "cpu/cpu_backend.h"
#ifdef FP8SCOPE_HAVE_CUDA
#include "cuda/cuda_backend.h"
#include "cuda/runtime/devices.h"
#endif

namespace fp8scope::cli {

void add_devices(CLI::App& app, int& exit_code) {
    auto* cmd = app.add_subcommand("devices", "List the devices this build can train on (CPU and CUDA GPUs)");
    cmd->callback([&exit_code] {
        std::printf("%s\n", CpuBackend().describe().c_str());
#ifdef FP8SCOPE_HAVE_CUDA
        std::string why;
        auto list = cuda::devices(&why);
        if (list.empty()) std::printf("cuda: no device (%s)\n", why.c_str());
        for (const auto& d : list) {
            const bool fp8 = cuda::has_fp8_tensor_cores(d), mx = d.major >= 10;
            std::printf("cuda:%d: %s, sm_%d%d, %.1f GiB, %d SMs, FP8 tensor cores %s, MXFP8 tensor cores %s, "
                        "cuBLASLt %s, CUDA runtime %s\n",
                        d.index, d.name.c_str(), d.major, d.minor, double(d.memory_bytes) / 1073741824.0,
                        d.multiprocessors, fp8 ? "yes" : "no", mx ? "yes" : "emulated", cublaslt_version().c_str(),
                        cuda_runtime_version().c_str());
        }
#else
        std::printf("cuda: this build has no CUDA backend (nvcc was not found when it was configured)\n");
#endif
        exit_code = 0;
    });
}

}  // namespace fp8scope::cli
