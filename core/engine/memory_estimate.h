// How much memory a training config needs, estimated before anything is allocated, so a
// config inside the documented limits that no machine could hold (terabytes of attention
// scores from a large batch x seq_len) is refused with a message instead of ending in
// std::bad_alloc or the OOM killer.
//
// The estimate counts what the trainer allocates for its lifetime: per run the float32
// parameters, gradients and AdamW moments, the activations of a (B, T) step (attention
// keeps B x n_head x T x T per layer), the FP8 operand copies of an FP8 recipe and the
// rewind snapshot of its parameters and moments (backend memory); once the data (corpus
// or file, with its int32 tokens), the evaluation batches and, when checkpoints are
// written, the host copy of every run's state. Code, libraries and HDF5 buffers are not
// counted.
#pragma once

#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "engine/train_config.h"

namespace fp8scope {

struct MemoryEstimate {
    // Bytes, in double: a config inside the field limits can need more than 2^64.
    // Backend memory (host on the CPU, the GPU's own on a GPU):
    double params = 0, grads = 0, adam = 0, activations = 0, operand_copies = 0, snapshots = 0;
    // Host memory on every backend:
    double data = 0, eval = 0, checkpoint = 0;

    double backend_bytes() const { return params + grads + adam + activations + operand_copies + snapshots; }
    double host_bytes() const { return data + eval + checkpoint; }
    double total() const { return backend_bytes() + host_bytes(); }

    // The same bytes grouped by what drives them, for the message: the config fields
    // (with their values) to lower.
    struct Part {
        std::string what;
        double bytes = 0;
        bool host = false;  // host memory on every backend
        std::string drivers;
    };
    std::vector<Part> parts;
};

// `act_bytes`: bytes per activation element of the backend (4: float32 on the CPU, 2:
// BF16 on a GPU); FP8 operand copies are counted at the same size.
MemoryEstimate estimate_memory(const TrainConfig& config, std::size_t act_bytes = 4);

// Memory this process can still use: MemAvailable (/proc/meminfo; sysconf's available
// pages where it is missing), lowered by the cgroup's limit (cgroup_memory) and an
// address-space limit (RLIMIT_AS). `source` says which figure bound it.
struct AvailableMemory {
    double bytes = 0;
    std::string source;
};
AvailableMemory available_memory();

// What the cgroup mounted at `root` leaves below its limit: cgroup v2's memory.max less
// memory.current, else cgroup v1's memory/memory.limit_in_bytes less
// memory/memory.usage_in_bytes; no limit ("max", v1's page-rounded 2^63) gives no figure.
std::optional<AvailableMemory> cgroup_memory(const std::filesystem::path& root);

// "12.5 GB", "3.2 TB": decimal units, three significant digits.
std::string format_bytes(double bytes);

// Throws std::invalid_argument when the config needs more than is available: the
// estimate, the machine's figure and the fields to lower. `host_only`: the backend's
// memory is not host memory (a GPU), only host_bytes() is compared. `local_ranks`: ranks
// of a job on this machine, each needing as much, all compared with the one figure.
void require_memory(const MemoryEstimate& need, const AvailableMemory& have, bool host_only, int local_ranks = 1);

}  // namespace fp8scope
