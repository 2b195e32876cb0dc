// Picks the compute backend for a device name: what `--device` and the config's `device`
// field choose between.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backend.h"
#include "comm/communicator.h"
#include "comm/rendezvous.h"

namespace fp8scope {

// "cpu" (threads <= 0: all cores) or "cuda" (the GPU numbered `ordinal` among the usable
// ones: a rank's LOCAL_RANK). Throws std::invalid_argument for an unknown name and
// std::runtime_error when this build or machine has no such device.
std::unique_ptr<Backend> make_backend(const std::string& device, int threads = 0, int ordinal = 0);

// The communicator of a data-parallel rank whose backend is `backend`: NCCL for cuda, TCP
// through the rendezvous for cpu. Collective over the ranks of `rendezvous`.
std::unique_ptr<Communicator> make_communicator(Backend& backend, Rendezvous& rendezvous);

// The device names this build can run ("cpu", and "cuda" when built with CUDA).
std::vector<std::string> built_devices();

}  // namespace fp8scope
