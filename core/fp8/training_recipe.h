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
    std::string name;  // canonical: "baseline", "delayed", ..., "nvfp4", "nvfp4:rht=0", "mxfp4:sr=1"
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
//   nvfp4         Transformer Engine's NVFP4 recipe: X 1x16 with rht, W 16x16 tiles, dY
//                 1x16 with rht and sr (rht: the columnwise copy only, see recipe.h)
//   mxfp4         MXFP4 1x32, RCEIL scales, for every operand
// The FP4 recipes take options written like a quantizer's, each 0 or 1, in any order:
//   nvfp4:rht=0   no random Hadamard transform (default 1: X and dY)
//   nvfp4:sr=0    round dY to nearest (default 1)
//   nvfp4:2d=0    W in 1x16 blocks (default 1: 16x16 tiles)
//   mxfp4:rht=1, mxfp4:sr=1   as nvfp4's on the same operands (default 0)
// The canonical name writes only the options that differ from the defaults, in the order
// rht, sr, 2d (nvfp4:rht=0:sr=0:2d=0). Throws std::invalid_argument naming the unknown
// recipe (listing the known ones) or the bad option.
TrainingRecipe training_recipe(std::string_view name);
// The base names (no options).
std::vector<std::string> training_recipe_names();

// True for a recipe of this build that quantizes nothing: the baseline, the float32 run a
// comparison measures the others against. False for a quantizing or an unknown name.
bool quantizes_nothing(std::string_view recipe);

}  // namespace fp8scope
