// The FP8 chunks of gradient sums on the CPU (fp8/chunks.h has the layout and the rules):
// the cast of an array chunk by chunk, each with the power-of-two scale of its own amax,
// and the float32 sum of dequantized chunks in a fixed order. cast_rules.h's rounding, so the
// codes equal encode() of format.cpp and the CUDA kernels' bit for bit.
#pragma once

#include <cstdint>

#include "fp8/chunks.h"
#include "fp8/format.h"

namespace fp8scope {

void quantize_chunks(std::uint8_t* slots, const float* x, const ChunkLayout& layout, Format format);
void dequantize_sum(float* out, const std::uint8_t* slots, std::int64_t slot_bytes, int count, std::int64_t n,
                    Format format);

}  // namespace fp8scope
