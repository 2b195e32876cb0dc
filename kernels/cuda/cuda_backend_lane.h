// A lane of the CUDA backend (cuda_backend.h, RunLanes): one stream and everything the ops
// issued on it reuse between calls. The main lane is the backend's own stream; each run
// lane has a stream of its own. Nothing here is shared between lanes, so lanes issue
// ops from their threads at once.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <vector>

#include "cuda/cuda_backend.h"
#include "cuda/gemm/gemm.h"

namespace fp8scope {

namespace cuda {
struct CastStats;
}

struct CudaBackend::Lane {
    // A new stream (non-blocking: the legacy default stream orders nothing here).
    explicit Lane(CudaBackend& backend);
    ~Lane();
    Lane(const Lane&) = delete;
    Lane& operator=(const Lane&) = delete;

    cudaStream_t owned = nullptr;   // destroyed last
    cudaStream_t stream = nullptr;  // owned, or a communicator's while it casts (set_stream)
    cudaEvent_t done = nullptr;     // the lane's work so far (close_lanes), or the main's (open_lanes)
    std::unique_ptr<cuda::GemmRunner> runner;
    std::unique_ptr<Scratch> workspace, head_weight, emulated_a, emulated_b, results, decay_runs, output_error_sums;
    std::vector<DecayRun> decay_uploaded;      // what decay_runs holds
    static constexpr std::size_t kResultBytes = 64;  // mean loss (float), grad norm (double), amax (float)
    void* host_results = nullptr;              // pinned: mean loss, grad norm, amax
    std::uint64_t* nonfinite_host = nullptr;   // pinned: stage_nonfinite's copy

    // Cast reports (see the top of cuda_backend.h).
    cuda::CastStats* report_device = nullptr;
    cuda::CastStats* report_host = nullptr;  // pinned
    std::size_t report_capacity = 0;
    std::vector<CastInfo*> pending_reports;

    // Per GEMM problem: true when it runs emulated (see run_gemm); those whose epilogue
    // cuBLASLt cannot fuse. Learnt per lane: a lane pays the first refusal of a shape once.
    using GemmKey = std::array<std::int64_t, 21>;
    std::map<GemmKey, bool> emulate;
    std::set<GemmKey> unfused;
    std::int64_t emulated_gemms = 0;
};

}  // namespace fp8scope
