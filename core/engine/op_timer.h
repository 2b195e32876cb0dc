// Times one op of a step: its host wall time goes to the capture sink, and the backend
// brackets it as an op scope (an NVTX range on a GPU; the kernels it launches carry the
// scope, so kernel timings are attributed to the op, its layer, GEMM and operand).
#pragma once

#include <cstdint>

#include "backend.h"
#include "engine/capture_sink.h"

namespace fp8scope {

class OpTimer {
public:
    OpTimer(CaptureSink* sink, Backend& backend, const char* op, int layer, int linear = -1, int operand = -1);
    ~OpTimer();
    OpTimer(const OpTimer&) = delete;
    OpTimer& operator=(const OpTimer&) = delete;

private:
    CaptureSink* sink_;
    Backend& backend_;
    OpTiming timing_;
};

}  // namespace fp8scope
