#include "cpu/chunks.h"

#include <bit>
#include <cstring>

#include "fp8/cast_rules.h"
#include "cpu/quantize.h"
#include "fp8/scaling.h"
#include "util/parallel.h"

namespace fp8scope {
namespace {

constexpr std::int64_t kGrain = 1 << 14;

// The cast of one element: NaN and Inf to the NaN code (with their sign), so they stay
// non-finite after a sum; finite x * s saturates as every recipe's cast does.
template <Format F>
std::uint8_t chunk_code(float x, float s) {
    const std::uint32_t u = std::bit_cast<std::uint32_t>(x);
    if ((u & cast::kInfBits) == cast::kInfBits) return static_cast<std::uint8_t>(cast::Traits<F>::kNaNCode | (u >> 24 & 0x80u));
    return cast::cast_code<F>(x * s);
}

template <Format F>
void quantize_chunk(std::uint8_t* slot, const float* x, std::int64_t n) {
    ChunkHeader h;
    h.amax = n ? scaling_amax(MatrixView{x, 1, n}) : 0.0f;
    const float s = compute_scale(h.amax, F, 0.0f, true);
    h.scale_inv = 1.0f / s;
    std::memcpy(slot, &h, sizeof h);
    std::uint8_t* codes = slot + sizeof h;
    parallel_for(n, kGrain, 0, [&](std::int64_t i0, std::int64_t i1) {
        for (std::int64_t i = i0; i < i1; ++i) codes[i] = chunk_code<F>(x[i], s);
    });
}

}  // namespace

void quantize_chunks(std::uint8_t* slots, const float* x, const ChunkLayout& layout, Format format) {
    for (int k = 0; k < layout.chunks; ++k) {
        std::uint8_t* slot = slots + k * layout.slot_bytes();
        if (format == Format::E4M3) quantize_chunk<Format::E4M3>(slot, x + layout.begin(k), layout.size(k));
        else quantize_chunk<Format::E5M2>(slot, x + layout.begin(k), layout.size(k));
    }
}

void dequantize_sum(float* out, const std::uint8_t* slots, std::int64_t slot_bytes, int count, std::int64_t n,
                    Format format) {
    const float* decoded = decode_table(format);
    parallel_for(n, kGrain, 0, [&](std::int64_t i0, std::int64_t i1) {
        for (int k = 0; k < count; ++k) {
            const std::uint8_t* slot = slots + k * slot_bytes;
            ChunkHeader h;
            std::memcpy(&h, slot, sizeof h);
            const std::uint8_t* codes = slot + sizeof h;
            for (std::int64_t i = i0; i < i1; ++i) {
                const float v = decoded[codes[i]] * h.scale_inv;
                out[i] = k == 0 ? v : out[i] + v;
            }
        }
    });
}

}  // namespace fp8scope
