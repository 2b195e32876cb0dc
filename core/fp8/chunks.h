// FP8 codes of a float32 array cut into chunks, each chunk with a power-of-two scale of
// its own: the form gradient sums travel in between data-parallel ranks
// (engine/fp8_grad_sum.h), one chunk per rank. Chunk k holds elements [k c, (k+1) c) of
// the n, c = ceil(n / chunks) (the last ones may be short or empty). Its slot is a
// 16-byte header, then its codes padded to 16 bytes, so every slot and every code array
// starts 16-byte aligned (vector loads) and a collective moves whole slots.
//
// The cast (Backend::quantize_chunks): s = compute_scale(amax, format, 0, pow2) of the
// chunk's amax (NaN ignored, Inf included), code = the saturating cast of x * s; a NaN or
// Inf x becomes the format's NaN code, so a non-finite gradient stays non-finite through
// a sum (E4M3 has no Inf, and a saturated Inf would pass for a large finite gradient).
// A power-of-two scale keeps x * s and decode(code) * scale_inv exact products, so the
// cast's rounding is the only one.
#pragma once

#include <cstdint>

namespace fp8scope {

// What a slot starts with (its first 16 bytes).
struct ChunkHeader {
    float scale_inv = 1.0f;  // 1 / s: dequantized value = decode(code) * scale_inv
    float amax = 0.0f;       // the amax s came from
    std::uint32_t reserved[2] = {0, 0};
};
static_assert(sizeof(ChunkHeader) == 16, "codes start 16 bytes into a slot");

struct ChunkLayout {
    std::int64_t n = 0;  // elements
    int chunks = 1;

    std::int64_t chunk() const { return (n + chunks - 1) / chunks; }  // elements per chunk
    std::int64_t begin(int k) const { return k * chunk() < n ? k * chunk() : n; }
    std::int64_t size(int k) const { return begin(k + 1) - begin(k); }
    std::int64_t slot_bytes() const { return std::int64_t(sizeof(ChunkHeader)) + (chunk() + 15) / 16 * 16; }
    std::int64_t bytes() const { return slot_bytes() * chunks; }
};

}  // namespace fp8scope
