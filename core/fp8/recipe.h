// Quantizers: how one float32 tensor gets its scales before the FP8 (or FP4) cast (a training
// recipe, training_recipe.h, gives one per GEMM operand). Each is a value type holding its
// parameters; `recipe_name` gives the one name used everywhere (CLI, JSON, HDF5) and
// `parse_recipe` reads it back.
//
// Name grammar:  BASE[:key=value]...   e.g.  current_e4m3_pow2,
//   block1x128_fp32, mxfp8_e5m2_rceil, delayed_e4m3:history=16:algo=most_recent:margin=1,
//   nvfp4, nvfp4_2d, mxfp4_floor, mxfp4_rceil, nvfp4:rht=1:sr=1 (FP4 options rht, sr: 0 or 1)
// Only parameters that differ from the defaults are written, so names stay short.
#pragma once

#include <initializer_list>
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

// NVFP4: E2M1 elements in 1x16 blocks along the contraction dimension (or 16x16 tiles,
// Transformer Engine's weight layout) with E4M3 block scales under an FP32 tensor scale.
// core/fp8/cast_rules.h has the rules. Both FP4 quantizers take two training options:
//   rht  the columnwise copy (what the wgrad GEMM reads: X and dY) is cast after the random
//        Hadamard transform of each 16 values along its contraction dimension
//        (cast::rht16), under the transformed tensor's own amax; a lone tensor in
//        `analyze` is transformed along its last dimension
//   sr   stochastic rounding of the elements (cast::e2m1_code_sr), random bits keyed by
//        cast::RoundingKey; scales are computed as without it
struct NVFP4Scaling {
    bool two_d = false;  // 16x16 tiles instead of 1x16 blocks
    bool rht = false;
    bool sr = false;
};

// MXFP4: E2M1 elements in 1x32 blocks with E8M0 scales X = 2^e.
struct MXFP4Scaling {
    MXRule rule = MXRule::RCeil;
    bool rht = false;
    bool sr = false;
};

using Recipe = std::variant<CurrentScaling, DelayedScaling, BlockScaling, MXScaling, NVFP4Scaling, MXFP4Scaling>;

std::string recipe_name(const Recipe& r);
// The FP8 element format; throws std::invalid_argument for the FP4 quantizers (E2M1).
Format recipe_format(const Recipe& r);
// True for the quantizers with E2M1 elements (NVFP4, MXFP4).
bool is_fp4(const Recipe& r);
// The quantizer as the rowwise copy of an operand is cast with: `r` without rht (the
// transform is the columnwise copy's, what the wgrad GEMM reads).
Recipe rowwise_quantizer(const Recipe& r);

// Throws std::invalid_argument naming the offending part of `name`.
Recipe parse_recipe(std::string_view name);
// Comma-separated list of names; "all" expands to default_analysis_recipes() followed by
// fp4_analysis_recipes().
std::vector<Recipe> parse_recipe_list(std::string_view list);

// What `analyze` runs when not told otherwise, and the what-if comparison of a training
// trace: every per-tensor current, blockwise and MXFP8 variant (delayed scaling on a lone
// tensor is only its first step).
std::vector<Recipe> default_analysis_recipes();
// The FP4 quantizers `analyze --quantizers all` adds: nvfp4, nvfp4_2d, mxfp4_floor, mxfp4_rceil.
std::vector<Recipe> fp4_analysis_recipes();
// The what-ifs a training trace records at capture steps: default_analysis_recipes() then
// fp4_analysis_recipes() (what "all" expands to).
std::vector<Recipe> what_if_recipes();

// The options of a name after its base, "k=v:k=v" (the text after the first ':'), in
// order. An empty item, a key without '=' or with an empty value, a key not in `known`
// and a repeated key throw std::invalid_argument: "<prefix>: <why>".
struct NameOption {
    std::string_view key, value;
};
std::vector<NameOption> name_options(std::string_view rest, std::initializer_list<std::string_view> known,
                                     const std::string& prefix);

}  // namespace fp8scope
