// Rotary position embedding (RoPE, Su et al.) on the q and k heads of the attention's qkv
// activation, in place, with the half-split pairing of GPT-NeoX and Hugging Face's Llama
// (rotate_half): element i < hs/2 of a head pairs with element i + hs/2, and the pair at
// position t turns by angle t * theta^(-2i/hs). Llama checkpoints in Hugging Face's layout
// (their q_proj/k_proj rows already permuted for this pairing) load without reordering.
// Shapes: B batch, T time, NH query heads, NKV key/value heads, hs head size; the qkv row
// is (NH + 2 NKV) hs = [q | k | v].
#pragma once

namespace fp8scope::ops {

// table (>= T, hs/2, 2): [cos, sin] of each position and pair (engine/model_config.h's
// rope_table). (x1, x2) -> (x1 cos - x2 sin, x2 cos + x1 sin) for every pair of q and k, or with
// `inverse` the turn back by -angle (the rotation's backward, applied to dqkv).
void rope(float* qkv, const float* table, int B, int T, int NH, int NKV, int hs, bool inverse);

}  // namespace fp8scope::ops
