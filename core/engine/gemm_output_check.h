// The error of a GEMM's output at a capture step: the same GEMM again on the unquantized
// operands (the backend's high-precision GEMM: float32 on the CPU, BF16 inputs with float32
// accumulation on a GPU), into a buffer kept from step to step, both handed to the capture
// sink (CaptureSink::on_gemm_output), which reduces them where they live.
//
// What is compared is what the GEMM wrote: its output with the bias; with a Gelu epilogue
// the GELU's input (aux: the GEMM's own result), with GeluBackward the gradient it wrote
// (the reference takes the same epilogue, so both carry the same gelu' factor). Smoothing's
// column scales come after the GEMM and are not part of it.
#pragma once

#include <memory>

#include "backend.h"
#include "engine/capture_sink.h"

namespace fp8scope {

class GemmOutputCheck {
public:
    explicit GemmOutputCheck(Backend& backend);
    ~GemmOutputCheck();

    // After backend.gemm(aq, ca, bq, cb, out, bias, false, epi): `a`, `b` are the values aq
    // and bq were cast from (row-major, as the casts read them). Without a quantized operand
    // the output is its own reference. Timed as a "capture" op of `layer`.
    void check(CaptureSink& sink, int layer, int linear, Gemm gemm, const GemmOperand& aq, const TensorDesc& a, Copy ca,
               const GemmOperand& bq, const TensorDesc& b, Copy cb, const TensorDesc& out, const float* bias,
               const GemmEpilogue& epi);

private:
    Backend& backend_;
    std::unique_ptr<OperandStorage> a_, b_;  // a GPU's BF16 copy of a float32 weight
    DeviceBuffer<float> reference_;          // in the output's type (sized in floats)
};

}  // namespace fp8scope
