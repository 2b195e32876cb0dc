// The compute backend: everything a training step runs on a device, behind one interface
// the engine calls. The CPU backend lives in kernels/cpu/, the CUDA one in kernels/cuda/;
// the engine never knows which one it drives.
//
// A backend is its roles, each in a header of its own under backend/, and a consumer
// that needs one role holds only that (capture analyses tensors through AnalysisOps):
//   DeviceMemory    allocations, copies, conversions, the wait for the device
//   LayerOps        the layers other than the quantized linears, and the output head
//   Fp8Ops          the cast of a GEMM operand under a recipe, and the GEMMs
//   OptimizerOps    FP8 gradient sums, the gradient norm, AdamW
//   AnalysisOps     the statistics and errors of one tensor (fp8/analysis.h)
//   NonFiniteOps    the scan for a training run's first NaN or Inf operand
//   KernelTracing   op scopes and the kernels a device ran
//   RunLanes        independent runs at once, each in a lane of its own
// Operands travel as device-neutral descriptors (backend/tensor_desc.h).
#pragma once

#include <string>

#include "backend/device_memory.h"
#include "backend/fp8_ops.h"
#include "backend/kernel_tracing.h"
#include "backend/layer_ops.h"
#include "backend/optimizer_ops.h"
#include "backend/analysis_ops.h"
#include "backend/nonfinite_ops.h"
#include "backend/run_lanes.h"
#include "backend/tensor_desc.h"

namespace fp8scope {

class Backend : public DeviceMemory,
                public LayerOps,
                public Fp8Ops,
                public OptimizerOps,
                public AnalysisOps,
                public NonFiniteOps,
                public KernelTracing,
                public RunLanes {
public:
    ~Backend() override = default;

    virtual Device device() const = 0;
    // One line naming the device and its libraries ("cpu: AMD EPYC, 2 threads, OpenBLAS ...").
    virtual std::string describe() const = 0;
    // Of activations: float32 on the CPU, BF16 on a GPU.
    virtual DType activation_dtype() const = 0;

    // gemm() with its epilogue as a pass of its own (gelu_forward, gelu_backward): the
    // same arithmetic as the CPU's, for a backend or a problem without the fused form.
    void gemm_then_epilogue(const GemmOperand& a, Copy ca, const GemmOperand& b, Copy cb, const TensorDesc& out,
                            const float* bias, bool accumulate, const GemmEpilogue& epi);
};

}  // namespace fp8scope
