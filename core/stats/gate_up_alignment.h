// How far a SwiGLU MLP's gate and up projections have aligned, channel by channel.
// Fishman et al. 2024 ("Scaling FP8 training to trillion-token LLMs") found that over long
// training the gate row w1_j and the up row w3_j of a channel j turn towards each other;
// then silu(w1_j . x) * (w3_j . x) grows like the square of the input, and the down
// projection's input gets an outlier channel no per-tensor FP8 scale holds (the reason
// for Smooth-SwiGLU). Pure functions, in float64.
#pragma once

#include <cstdint>

namespace fp8scope::stats {

// A channel's |cos| above this counts as aligned: the rows point within ~26 degrees.
inline constexpr double kAlignedCos = 0.9;

struct GateUpAlignment {
    std::int64_t channels = 0;
    // Over the channels' |cos(w1_j, w3_j)| (a channel with a zero row has cos 0).
    double mean_abs_cos = 0, p99_abs_cos = 0, max_abs_cos = 0;
    std::int64_t aligned = 0;  // channels with |cos| > kAlignedCos
    // The channel whose |cos| x ||w1_j|| ||w3_j|| is largest: the one that grows the down
    // projection's input most for an input along both rows. Its cos keeps its sign
    // (anti-aligned rows make outliers of the opposite sign).
    std::int64_t top_channel = -1;
    double top_cos = 0, top_norm_product = 0;
};

// `fc1` is the (2 * H, C) row-major weight of a SwiGLU MLP's first linear: rows 0..H-1
// are the gate (w1, through SiLU), rows H..2H-1 the up projection (w3), channel j's pair
// is rows j and H + j. The 99th percentile is the |cos| of rank ceil(0.99 * H) in
// ascending order (nearest rank).
GateUpAlignment gate_up_alignment(const float* fc1, std::int64_t H, std::int64_t C);

}  // namespace fp8scope::stats
