// The engine's side of capture: every step the model reports its op timings and what each
// cast computed (amax, scale; after the step's backward); at a capture step it also hands
// over every GEMM operand.
// The sink (capture/, or a test) decides what to compute and record; the model never
// knows about files or sockets.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "backend/analysis_ops.h"
#include "fp8/scaling.h"
#include "fp8/training_recipe.h"
#include "operands.h"

namespace fp8scope {

// One GEMM operand as the recipe saw it, before quantization: a descriptor of backend
// memory, so a device analyses it where it lives (AnalysisOps::analyze).
struct OperandCapture {
    int linear = 0;         // index into Model::linears()
    Gemm gemm = Gemm::Fprop;
    Operand operand = Operand::X;
    TensorDesc values;      // contraction dimension last (a transposed view for repeats)
    AnalysisOps* analysis = nullptr;      // the backend `values` lives in
    const Recipe* recipe = nullptr;          // the recipe in use; nullptr when unquantized
    const DelayedState* delayed = nullptr;   // the amax history, for delayed scaling
    // The transpose of this operand as an earlier GEMM of the step saw it (W in dgrad,
    // dY and X in wgrad): a sink may reuse what does not depend on orientation.
    bool transposed_repeat = false;
};

// One GEMM's output at a capture step next to the same GEMM of the unquantized operands
// (engine/gemm_output_check.h): both in backend memory, same shape and type, valid only
// during the call. A GEMM with no quantized operand is its own reference (the same
// tensor: no error), so it costs no second GEMM.
struct GemmOutputCapture {
    int linear = 0;
    Gemm gemm = Gemm::Fprop;
    TensorDesc output, reference;
    AnalysisOps* analysis = nullptr;  // the backend both live in (AnalysisOps::output_error)
};

// The cast of one operand in a training step: what the recipe computed anyway, so it is
// reported every step (capture or not) and lets amax spikes between capture steps show.
// The operand feeds two GEMMs; the figures hold for both (the same tensor, transposed),
// unless a precision plan cast it apart for them: then `gemm` names the one they hold for.
struct OperandScaling {
    int linear = 0;
    Operand operand = Operand::X;
    CastInfo cast;  // amax, per-tensor scale (NaN for block recipes), overflow count
    std::optional<Gemm> gemm;
};

// Host wall time of one op of a step, in nanoseconds of a steady clock (on a GPU: the time
// to launch its kernels; the kernels come with `scope`, see KernelTracing::trace_kernels).
struct OpTiming {
    std::string_view op;    // "fprop", "dgrad", "wgrad", "quantize", "attention", "layernorm", ...
    int linear = -1;        // the linear layer it belongs to, -1 if none
    int layer = -1;         // transformer block, -1 for embedding/head
    std::int64_t start_ns = 0, end_ns = 0;
    int operand = -1;       // the operand a quantize op cast (Operand), -1 if none
    std::uint64_t scope = 0;  // the op scope its kernels carry (KernelTracing::begin_op)
    // Scopes opened inside this op are (scope, scope_end): an op whose inner ops report no
    // timings (evaluation's forward) still owns their kernels.
    std::uint64_t scope_end = 0;
};

class CaptureSink {
public:
    virtual ~CaptureSink() = default;
    // Called from the training thread; `values` is only valid during the call.
    virtual void on_operand(const OperandCapture& operand) = 0;
    virtual void on_scaling(const OperandScaling& /*scaling*/) {}
    // At a capture step, after each GEMM of a training step (not called otherwise).
    virtual void on_gemm_output(const GemmOutputCapture& /*output*/) {}
    virtual void on_op(const OpTiming& timing) = 0;
};

}  // namespace fp8scope
