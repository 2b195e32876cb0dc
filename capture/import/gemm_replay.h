// The three GEMMs of one imported linear replayed under a run's precision plan: each GEMM
// of the operands as the plan casts them (rowwise and columnwise copies, delayed scaling
// with the history of the captured steps) against the same GEMM of the unquantized
// operands, handed to the run's capture sink through the engine's GemmOutputCheck, so the
// trace holds each GEMM's output error as a `train --out` trace does. The captured run's
// GEMMs have no bias here (its bias is not captured): both sides leave it out, and a
// GELU the run applies after a GEMM is not part of it.
#pragma once

#include <array>
#include <functional>
#include <memory>

#include "backend.h"
#include "engine/capture_sink.h"
#include "engine/gemm_output_check.h"
#include "fp8/precision_plan.h"

namespace fp8scope::import {

class GemmReplay {
public:
    explicit GemmReplay(Backend& backend);
    ~GemmReplay();

    // The delayed scaling state operand o is cast with under quantizer q (null: s = 1).
    using DelayedOf = std::function<const DelayedState*(Operand o, const Recipe& q)>;

    // x (N,K), w (M,K), dy (N,M) in backend memory, indexed by Operand.
    void run(CaptureSink& sink, int layer, int linear, const PrecisionPlan& plan, const std::array<TensorDesc, 3>& v,
             const DelayedOf& delayed);

private:
    // Copy `copy` of `values` under q, in storage slot `slot` (operand x 2 + copy).
    GemmOperand cast(const TensorDesc& values, const Recipe* q, Copy copy, const DelayedState* state, std::size_t slot);

    Backend& backend_;
    GemmOutputCheck check_;
    std::array<std::unique_ptr<OperandStorage>, 6> storage_;  // operand x copy
    std::array<std::unique_ptr<AmaxHistory>, 6> history_;    // a delayed cast's state
    DeviceBuffer<float> out_;
};

}  // namespace fp8scope::import
