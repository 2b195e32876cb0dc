// `fp8scope-engine devices`: which GPUs this build can use.
#include <cstdio>

#include "commands.h"
#ifdef FP8SCOPE_HAVE_CUDA
#include "cuda/devices.h"
#endif

namespace fp8scope::cli {

void add_devices(CLI::App& app, int& exit_code) {
    auto* cmd = app.add_subcommand("devices", "List the CUDA devices this build can use");
    cmd->callback([&exit_code] {
#ifdef FP8SCOPE_HAVE_CUDA
        std::string why;
        auto list = cuda::devices(&why);
        if (list.empty()) {
            std::printf("no CUDA device: %s\n", why.c_str());
            exit_code = 1;
            return;
        }
        for (const auto& d : list)
            std::printf("%d  %s  sm_%d%d  %.1f GiB  %d SMs%s\n", d.index, d.name.c_str(), d.major, d.minor,
                        d.memory_bytes / 1073741824.0, d.multiprocessors,
                        cuda::has_fp8_tensor_cores(d) ? "  fp8" : "");
#else
        std::printf("this build has no CUDA backend (nvcc was not found when it was configured)\n");
        exit_code = 1;
#endif
    });
}

}  // namespace fp8scope::cli
