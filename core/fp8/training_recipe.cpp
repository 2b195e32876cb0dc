// The named training recipes, built directly as Recipe values (no name parsing), so the
// engine's choices are visible in one place and match training_recipe.h.
#include "fp8/training_recipe.h"

#include <algorithm>
#include <stdexcept>

namespace fp8scope {
namespace {

[[noreturn]] void bad_option(std::string_view name, const std::string& what) {
    throw std::invalid_argument("training recipe '" + std::string(name) + "': " + what);
}

// The options of an FP4 recipe: rht, sr (both) and 2d (nvfp4), each 0 or 1.
struct FP4Options {
    bool rht, sr, two_d;
};

FP4Options parse_fp4_options(std::string_view name, std::string_view base, std::string_view rest, FP4Options o) {
    const bool nvfp4 = base == "nvfp4";
    const std::string prefix = "training recipe '" + std::string(name) + "'";
    const std::vector<NameOption> options =
        nvfp4 ? name_options(rest, {"rht", "sr", "2d"}, prefix) : name_options(rest, {"rht", "sr"}, prefix);
    for (const NameOption& opt : options) {
        bool& slot = opt.key == "rht" ? o.rht : opt.key == "sr" ? o.sr : o.two_d;
        if (opt.value != "0" && opt.value != "1")
            bad_option(name, "option '" + std::string(opt.key) + "' must be 0 or 1, got '" + std::string(opt.value) + "'");
        slot = opt.value == "1";
    }
    return o;
}

// nvfp4 / mxfp4 with their options; the name written canonically.
TrainingRecipe fp4_recipe(std::string_view name, std::string_view base, std::string_view rest) {
    const bool nvfp4 = base == "nvfp4";
    const FP4Options def = nvfp4 ? FP4Options{true, true, true} : FP4Options{false, false, false};
    const FP4Options o = parse_fp4_options(name, base, rest, def);
    TrainingRecipe r;
    r.name = std::string(base);
    if (o.rht != def.rht) r.name += o.rht ? ":rht=1" : ":rht=0";
    if (o.sr != def.sr) r.name += o.sr ? ":sr=1" : ":sr=0";
    if (o.two_d != def.two_d) r.name += ":2d=0";
    // rht on the operands the wgrad GEMM reads through their columnwise copies (X, dY),
    // never W (its columnwise copy feeds dgrad against an untransformed dY); sr on dY only.
    if (nvfp4) {
        r.x = NVFP4Scaling{false, o.rht, false};
        r.w = NVFP4Scaling{o.two_d, false, false};
        r.dy = NVFP4Scaling{false, o.rht, o.sr};
    } else {
        r.x = MXFP4Scaling{MXRule::RCeil, o.rht, false};
        r.w = MXFP4Scaling{MXRule::RCeil, false, false};
        r.dy = MXFP4Scaling{MXRule::RCeil, o.rht, o.sr};
    }
    return r;
}

}  // namespace

std::vector<std::string> training_recipe_names() {
    return {"baseline", "delayed", "delayed_e4m3", "current", "blockwise", "mxfp8", "nvfp4", "mxfp4"};
}

TrainingRecipe training_recipe(std::string_view name) {
    const std::size_t colon = name.find(':');
    const std::string_view base = name.substr(0, colon);
    const std::string_view rest = colon == std::string_view::npos ? std::string_view{} : name.substr(colon + 1);
    if (base == "nvfp4" || base == "mxfp4") {
        if (colon != std::string_view::npos && rest.empty()) bad_option(name, "empty option (a trailing ':')");
        return fp4_recipe(name, base, rest);
    }
    const auto names = training_recipe_names();
    if (colon != std::string_view::npos && std::find(names.begin(), names.end(), base) != names.end())
        bad_option(name, std::string(base) + " takes no options (only nvfp4 and mxfp4 do)");
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
