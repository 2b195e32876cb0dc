// A GEMM's operand and output types, derived from what the trace records (it records no
// dtype per kernel): the training recipe in use at the record's step (/steps.recipe),
// which GEMM the op is (fprop X x W, dgrad dY x W, wgrad dY x X, training_recipe.h) and
// the device in the machine string. The CUDA backend (kernels/cuda/cuda_backend.h) runs
// FP8 operands on FP8 tensor cores where cuBLASLt has a kernel and otherwise dequantizes
// both to BF16 ("emulated"; MX always, no MX GEMM in this build), writes activations in
// BF16 and weight gradients in F32. The CPU backend runs an sgemm on the dequantized
// float32 copies. Both accumulate in float32 (no FP8 fast accumulation).
#pragma once

#include <QString>
#include <optional>
#include <string>

#include "models/gemm_shape.h"

namespace fp8scope::views {

struct GemmDtypes {
    QString a, b, out;  // "E4M3", "E5M2", "BF16", "F32"; empty when not known
    QString emulated;   // what the GEMM stands for when run on dequantized copies, e.g. "MXFP8"
    QString why;        // the rule applied, or why it cannot be known
    bool known() const { return !a.isEmpty(); }
    // "E4M3 x E5M2 -> BF16 (FP32 acc)", "BF16 x BF16 -> BF16 (FP32 acc; MXFP8 emulated)", "?"
    QString label() const;
    bool operator==(const GemmDtypes&) const = default;
};

// The types of GEMM `op` ("fprop", "dgrad", "wgrad") under training recipe `recipe` on the
// device `machine` (TraceMeta::machine). `shape` decides whether cuBLASLt takes an FP8
// problem (k % 16, output rows of 16 bytes, block scaling m, n % 8); without it the
// problem is taken to fit.
GemmDtypes gemm_dtypes(const std::string& recipe, const std::string& op, const std::string& machine,
                       const std::optional<GemmShape>& shape = {});

}  // namespace fp8scope::views
