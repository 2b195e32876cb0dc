// The fast cast of cast_rules.h against format.cpp's scalar encode(): every tie between
// neighbouring codes and the floats beside it, a sweep over float32 bit patterns, random
// patterns, and the special values.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "fp8/cast_rules.h"
#include "fp8/format.h"

namespace fp8scope {
namespace {

template <Format F>
void expect_matches_encode(float y) {
    std::uint32_t over_code = 7, over_value = 7;
    const std::uint8_t code = cast::cast_code<F>(y, over_code);
    const float value = cast::round_sat<F>(y, over_value);
    const std::uint8_t want = encode(F, y, Overflow::Saturate);
    ASSERT_EQ(code, want) << "y=" << y << " bits=0x" << std::hex << std::bit_cast<std::uint32_t>(y);
    const float want_value = decode(F, want);
    if (std::isnan(want_value)) {
        ASSERT_TRUE(std::isnan(value)) << y;
    } else {
        ASSERT_EQ(std::bit_cast<std::uint32_t>(value), std::bit_cast<std::uint32_t>(want_value)) << y;
    }
    // Overflow: a non-NaN y that the non-saturating cast sends to NaN or Inf.
    const std::uint32_t want_over =
        !std::isnan(y) && !is_finite_code(F, encode(F, y, Overflow::NonSaturate)) ? 1u : 0u;
    ASSERT_EQ(over_code, want_over) << y;
    ASSERT_EQ(over_value, want_over) << y;
}

template <Format F>
void check_ties() {
    // Midpoints of neighbouring non-negative finite codes (exact in float32), the floats
    // beside them, and the codes themselves; both signs.
    std::vector<float> values;
    for (int c = 0; c < 0x80; ++c) {
        const float v = decode(F, static_cast<std::uint8_t>(c));
        if (!std::isfinite(v)) continue;
        values.push_back(v);
        const float next = decode(F, static_cast<std::uint8_t>(c + 1));
        // Past max the next grid point is max + one step of the top binade.
        const float hi = std::isfinite(next) ? next : v + (v - decode(F, static_cast<std::uint8_t>(c - 1)));
        const float mid = (v + hi) / 2;
        for (float m : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e30f), hi}) values.push_back(m);
    }
    for (float v : values) {
        expect_matches_encode<F>(v);
        expect_matches_encode<F>(-v);
    }
}

TEST(Cast, TiesAndCodesE4M3) { check_ties<Format::E4M3>(); }
TEST(Cast, TiesAndCodesE5M2) { check_ties<Format::E5M2>(); }

template <Format F>
void check_specials() {
    const float inf = std::numeric_limits<float>::infinity();
    for (float y : {0.0f, -0.0f, inf, -inf, std::numeric_limits<float>::quiet_NaN(),
                    -std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::max(),
                    -std::numeric_limits<float>::max(), std::numeric_limits<float>::denorm_min(),
                    std::numeric_limits<float>::min(), 1e30f, -1e-30f}) {
        expect_matches_encode<F>(y);
    }
    // Signalling-NaN and other NaN payloads.
    for (std::uint32_t bits : {0x7F800001u, 0x7FBFFFFFu, 0xFFC00001u, 0x7FFFFFFFu}) {
        expect_matches_encode<F>(std::bit_cast<float>(bits));
    }
}

TEST(Cast, SpecialValuesE4M3) { check_specials<Format::E4M3>(); }
TEST(Cast, SpecialValuesE5M2) { check_specials<Format::E5M2>(); }

// Every float32 bit pattern with a stride coprime to 2^32 (about 4.2M patterns, all
// exponents and mantissa positions), then 2M random patterns.
template <Format F>
void check_sweep() {
    for (std::uint64_t b = 0; b < (1ull << 32); b += 1021) expect_matches_encode<F>(std::bit_cast<float>(static_cast<std::uint32_t>(b)));
    std::mt19937 rng(12345);
    for (int i = 0; i < 2000000; ++i) expect_matches_encode<F>(std::bit_cast<float>(static_cast<std::uint32_t>(rng())));
}

TEST(Cast, BitPatternSweepE4M3) { check_sweep<Format::E4M3>(); }
TEST(Cast, BitPatternSweepE5M2) { check_sweep<Format::E5M2>(); }

// Every float32 in the range where the codes live (|y| < 2 * max, all 2^-9.. patterns of
// the subnormal region included): the region where rounding decisions are made.
template <Format F>
void check_dense_region() {
    const std::uint32_t top = std::bit_cast<std::uint32_t>(2 * fp8_max(F));
    for (std::uint32_t b = 0; b < top; b += 127) expect_matches_encode<F>(std::bit_cast<float>(b));
}

TEST(Cast, DenseCodeRegionE4M3) { check_dense_region<Format::E4M3>(); }
TEST(Cast, DenseCodeRegionE5M2) { check_dense_region<Format::E5M2>(); }

TEST(Cast, QdqIsDecodeOfCastTimesScaleInv) {
    const float s = 3.7f, si = 1.0f / s;
    for (float x : {0.1f, -5.0f, 121.0f, 1e-4f, 1e6f}) {
        EXPECT_EQ(cast::qdq<Format::E4M3>(x, s, si), decode(Format::E4M3, encode(Format::E4M3, x * s)) * si);
        EXPECT_EQ(cast::qdq<Format::E5M2>(x, s, si), decode(Format::E5M2, encode(Format::E5M2, x * s)) * si);
    }
}

}  // namespace
}  // namespace fp8scope
