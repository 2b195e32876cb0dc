// Picks the compute backend for a device name: what `--device` and the config's `device`
// field choose between.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backend.h"

namespace fp8scope {

// "cpu" (threads <= 0: all cores) or "cuda" (the GPU numbered `ordinal` among the usable
// ones: a rank's LOCAL_RANK). Throws std::invalid_argument for an unknown name and
// std::runtime_error when this build or machine has no such device.
std::unique_ptr<Backend> make_backend(const std::string& device, int threads = 0, int ordinal = 0);

// The device names this build can run ("cpu", and "cuda" when built with CUDA).
std::vector<std::string> built_devices();

}  // namespace fp8scope
