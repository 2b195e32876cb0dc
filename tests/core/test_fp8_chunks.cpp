// The CPU backend's FP8 chunk ops (Backend::quantize_chunks, dequantize_sum) against the
// rules of fp8/chunks.h written out in double on format.cpp's encode() (support/
// chunk_oracle.h): codes, headers, NaN and Inf, empty chunks, sizes that do not divide.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "cpu/cpu_backend.h"
#include "support/chunk_oracle.h"

namespace fp8scope {
namespace {

using testing::chunk_amax;
using testing::chunk_scale;
using testing::chunk_test_values;

ChunkHeader header_of(const std::vector<std::uint8_t>& slots, const ChunkLayout& l, int k) {
    ChunkHeader h;
    std::memcpy(&h, slots.data() + k * l.slot_bytes(), sizeof h);
    return h;
}

TEST(CpuChunks, QuantizeChunksCastsEachChunkWithThePowerOfTwoScaleOfItsAmax) {
    CpuBackend cpu(1);
    for (Format f : {Format::E4M3, Format::E5M2})
        for (const ChunkLayout l : {ChunkLayout{1, 3}, ChunkLayout{7, 2}, ChunkLayout{4099, 3}, ChunkLayout{4096, 4},
                                    ChunkLayout{300, 1}})
            for (bool nonfinite : {false, true}) {
                SCOPED_TRACE(std::string(name(f)) + " n " + std::to_string(l.n) + " chunks " +
                             std::to_string(l.chunks) + (nonfinite ? " with NaN and Inf" : ""));
                const std::vector<float> x = chunk_test_values(l.n, unsigned(l.n * 7 + l.chunks), nonfinite);
                std::vector<std::uint8_t> slots(static_cast<std::size_t>(l.bytes()), 0xAB);
                cpu.quantize_chunks(slots.data(), x.data(), l, f);
                for (int k = 0; k < l.chunks; ++k) {
                    const float* xk = x.data() + l.begin(k);
                    const double amax = chunk_amax(xk, l.size(k)), s = chunk_scale(amax, f);
                    const ChunkHeader h = header_of(slots, l, k);
                    EXPECT_EQ(h.amax, float(amax)) << "chunk " << k;
                    EXPECT_EQ(h.scale_inv, float(1 / s)) << "chunk " << k;
                    EXPECT_EQ(h.reserved[0], 0u);
                    EXPECT_EQ(h.reserved[1], 0u);
                    const std::uint8_t* codes = slots.data() + k * l.slot_bytes() + sizeof(ChunkHeader);
                    for (std::int64_t i = 0; i < l.size(k); ++i) {
                        const std::uint8_t want = std::isfinite(xk[i])
                                                      ? encode(f, static_cast<float>(double(xk[i]) * s))
                                                      : std::uint8_t((f == Format::E4M3 ? 0x7F : 0x7E) |
                                                                     (std::signbit(xk[i]) ? 0x80 : 0));
                        ASSERT_EQ(codes[i], want) << "chunk " << k << " element " << i << " x " << xk[i];
                    }
                }
            }
}

TEST(CpuChunks, DequantizeSumAddsTheSlotsInFloat32InTheirOrder) {
    CpuBackend cpu(1);
    for (Format f : {Format::E4M3, Format::E5M2}) {
        const int count = 3;
        const std::int64_t n = 1001, slot_bytes = ChunkLayout{n, 1}.slot_bytes();
        std::vector<std::uint8_t> slots(static_cast<std::size_t>(slot_bytes * count));
        std::vector<std::vector<float>> x;
        for (int k = 0; k < count; ++k) {
            x.push_back(chunk_test_values(n, 100u + unsigned(k), k == 1));
            cpu.quantize_chunks(slots.data() + k * slot_bytes, x.back().data(), ChunkLayout{n, 1}, f);
        }
        std::vector<float> got(static_cast<std::size_t>(n)), one(static_cast<std::size_t>(n));
        cpu.dequantize_sum(got.data(), slots.data(), slot_bytes, count, n, f);
        cpu.dequantize_sum(one.data(), slots.data() + slot_bytes, slot_bytes, 1, n, f);
        for (std::int64_t i = 0; i < n; ++i) {
            float want = 0;
            for (int k = 0; k < count; ++k) {
                ChunkHeader h;
                std::memcpy(&h, slots.data() + k * slot_bytes, sizeof h);
                const float v = decode(f, slots[std::size_t(k * slot_bytes + 16 + i)]) * h.scale_inv;
                want = k == 0 ? v : want + v;
            }
            const std::size_t j = std::size_t(i);
            if (std::isnan(want)) {
                EXPECT_TRUE(std::isnan(got[j])) << i;
            } else {
                ASSERT_EQ(got[j], want) << i;
            }
            // One slot: its dequantized values, the rule's value for every element.
            const double v = testing::chunk_value(x[1][j], chunk_scale(chunk_amax(x[1].data(), n), f), f);
            if (std::isnan(v)) {
                EXPECT_TRUE(std::isnan(one[j])) << i;
            } else {
                ASSERT_EQ(one[j], float(v)) << i;
            }
        }
    }
}

}  // namespace
}  // namespace fp8scope
