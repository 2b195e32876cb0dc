// Quantizers: how one float32 tensor gets its scales before the FP8 cast (a training
// recipe, training_recipe.h, gives one per GEMM operand). Each is a value type holding its
// parameters; `recipe_name` gives the one name used everywhere (CLI, JSON, HDF5) and
// `parse_recipe` reads it back.
//
// Name grammar:  BASE[:key=value]...   e.g.  current_e4m3_pow2,
//   block1x128_fp32, mxfp8_e5m2_rceil, delayed_e4m3:history=16:algo=most_recent:margin=1
// Only parameters that differ from the defaults are written, so names stay short.
#pragma once

#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "fp8/format.h"

namespace fp8scope {

// Per-tensor current (just-in-time) scaling: s = fp8_max / max(amax, eps).
struct CurrentScaling {
    Format format = Format::E4M3;
    float eps = 0.0f;
    bool pow2 = false;  // round s down to a power of two (clear the float32 mantissa)
};

enum class AmaxAlgo { Max, MostRecent };

// Per-tensor delayed scaling from an amax history of earlier steps.
struct DelayedScaling {
    Format format = Format::E4M3;
    int history = 1024;
    AmaxAlgo algo = AmaxAlgo::Max;
    int margin = 0;  // s = fp8_max / amax_ref / 2^margin
};

// DeepSeek-V3 style blockwise scaling: one scale per block_rows x block_cols block of the
// 2-D tensor whose last dimension is the contraction dimension. Edge blocks may be partial.
struct BlockScaling {
    Format format = Format::E4M3;
    int block_rows = 1;     // 1 for 1x128 tiles, 128 for 128x128 blocks
    int block_cols = 128;
    bool pow2 = false;      // power-of-two scales (rounded down) instead of float32
};

enum class MXRule {
    Floor,  // OCP MX: e = floor(log2(block_amax)) - emax_elem
    RCeil,  // e = ceil(log2(block_amax / fp8_max)) (cuBLAS, TransformerEngine)
};

// MXFP8: 1x32 blocks along the contraction dimension with E8M0 scales X = 2^e.
struct MXScaling {
    Format format = Format::E4M3;
    MXRule rule = MXRule::RCeil;
    int block = 32;
};

using Recipe = std::variant<CurrentScaling, DelayedScaling, BlockScaling, MXScaling>;

std::string recipe_name(const Recipe& r);
Format recipe_format(const Recipe& r);

// Throws std::invalid_argument naming the offending part of `name`.
Recipe parse_recipe(std::string_view name);
// Comma-separated list of names; "all" expands to default_analysis_recipes().
std::vector<Recipe> parse_recipe_list(std::string_view list);

// What `analyze` runs when not told otherwise: every per-tensor current, blockwise and
// MXFP8 variant (delayed scaling on a lone tensor is only its first step).
std::vector<Recipe> default_analysis_recipes();

}  // namespace fp8scope
