// What a training run does to the GEMM operands of its linear layers. Every linear layer
// runs three GEMMs, each with two operands, quantized along that GEMM's contraction
// dimension:
//   fprop  Y  = X W^T   X (N,K) rowwise,    W (M,K) rowwise
//   dgrad  dX = dY W    dY (N,M) rowwise,   W columnwise (as W^T, (K,M))
//   wgrad  dW = dY^T X  dY columnwise (dY^T, (M,N)), X columnwise (X^T, (K,N))
// A recipe gives one quantizer (fp8/recipe.h) per operand kind; delayed scaling keeps one amax
// history per layer and operand kind, shared by both orientations.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fp8/recipe.h"
#include "operands.h"

namespace fp8scope {

struct TrainingRecipe {
    std::string name;  // "baseline", "delayed", "delayed_e4m3", "current", "blockwise", "mxfp8"
    std::optional<Recipe> x, w, dy;  // nullopt: the operand stays float32

    bool quantized() const { return x || w || dy; }
    const std::optional<Recipe>& operand(Operand o) const {
        return o == Operand::X ? x : o == Operand::W ? w : dy;
    }
};

// The named training recipes:
//   baseline      no quantization (the float32 reference run)
//   delayed       HYBRID delayed scaling: X, W E4M3; dY E5M2; history 1024, algo max
//   delayed_e4m3  delayed scaling, E4M3 for every operand
//   current       HYBRID per-tensor current scaling
//   blockwise     DeepSeek-V3: X and dY 1x128, W 128x128, E4M3, power-of-2 scales
//   mxfp8         MXFP8 1x32 E4M3, RCEIL scales
// Throws std::invalid_argument naming the unknown recipe and listing the known ones.
TrainingRecipe training_recipe(std::string_view name);
std::vector<std::string> training_recipe_names();

// True for a recipe of this build that quantizes nothing: the baseline, the float32 run a
// comparison measures the others against. False for a quantizing or an unknown name.
bool quantizes_nothing(std::string_view recipe);

}  // namespace fp8scope
