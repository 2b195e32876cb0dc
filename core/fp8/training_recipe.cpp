// The named training recipes, built directly as Recipe values (no name parsing), so the
// engine's choices are visible in one place and match training_recipe.h.
#include "fp8/training_recipe.h"

#include <algorithm>
#include <stdexcept>

namespace fp8scope {

std::vector<std::string> training_recipe_names() {
    return {"baseline", "delayed", "delayed_e4m3", "current", "blockwise", "mxfp8"};
}

TrainingRecipe training_recipe(std::string_view name) {
    TrainingRecipe r;
    r.name = std::string(name);
    if (name == "baseline") return r;
    if (name == "delayed" || name == "delayed_e4m3") {
        DelayedScaling fwd{Format::E4M3, 1024, AmaxAlgo::Max, 0};
        DelayedScaling bwd = fwd;
        if (name == "delayed") bwd.format = Format::E5M2;  // HYBRID
        r.x = fwd;
        r.w = fwd;
        r.dy = bwd;
        return r;
    }
    if (name == "current") {
        r.x = CurrentScaling{Format::E4M3, 0.0f, false};
        r.w = CurrentScaling{Format::E4M3, 0.0f, false};
        r.dy = CurrentScaling{Format::E5M2, 0.0f, false};
        return r;
    }
    if (name == "blockwise") {
        BlockScaling tile{Format::E4M3, 1, 128, true};    // 1x128 along the contraction dim
        BlockScaling block{Format::E4M3, 128, 128, true};  // 128x128 weight blocks
        r.x = tile;
        r.w = block;
        r.dy = tile;
        return r;
    }
    if (name == "mxfp8") {
        MXScaling mx{Format::E4M3, MXRule::RCeil, 32};
        r.x = mx;
        r.w = mx;
        r.dy = mx;
        return r;
    }
    std::string known;
    for (const auto& n : training_recipe_names()) known += (known.empty() ? "" : ", ") + n;
    throw std::invalid_argument("unknown training recipe '" + std::string(name) + "' (known: " + known + ")");
}

bool quantizes_nothing(std::string_view recipe) {
    const auto names = training_recipe_names();
    return std::find(names.begin(), names.end(), recipe) != names.end() && !training_recipe(recipe).quantized();
}

}  // namespace fp8scope
