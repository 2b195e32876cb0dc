// Where a benchmark's device time goes: the kernels, copies and memsets of a few calls,
// recorded through the engine's own CUPTI tracer, summed per name and printed per call.
#pragma once

#include <cstdio>
#include <functional>
#include <string>

#include <cuda_runtime.h>

#include "cuda/runtime/check.h"
#include "cuda/runtime/kernel_tracer.h"
#include "kernel_tally.h"

namespace fp8scope::bench {

class KernelBreakdown : public KernelTally {
public:
    // Runs f `calls` times under the tracer; false (and why, printed) when CUPTI is refused.
    bool record(int calls, const std::function<void()>& f) {
        reset(calls);
        auto& tracer = cuda::KernelTracer::instance();
        const std::string why = tracer.start(this);
        if (!why.empty()) {
            std::printf("    (no kernel breakdown: %s)\n", why.c_str());
            return false;
        }
        for (int i = 0; i < calls; ++i) f();
        FP8SCOPE_CUDA_CHECK(cudaDeviceSynchronize());  // records of unfinished kernels have no times
        tracer.flush();
        tracer.stop();
        return true;
    }
};

}  // namespace fp8scope::bench
