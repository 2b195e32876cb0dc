// binary16 and bfloat16 conversions against an oracle computed from the bit fields with
// ldexp in double: every one of the 65536 patterns of each, every tie between
// neighbours, and random float32 inputs rounded by a nearest-value search.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

#include "io/half.h"

using namespace fp8scope;

namespace {

struct Layout {
    int man_bits;
    int exp_bits;
    int bias;
};
constexpr Layout kHalf{10, 5, 15};
constexpr Layout kBf16{7, 8, 127};

// Value of a 16-bit pattern; the all-ones exponent with mantissa 0 reads as the
// power of two just past the largest finite value when `inf_as_next` is set.
double oracle(const Layout& L, std::uint16_t bits, bool inf_as_next = false) {
    int sign = bits >> 15;
    int exp = (bits >> L.man_bits) & ((1 << L.exp_bits) - 1);
    int man = bits & ((1 << L.man_bits) - 1);
    double v;
    if (exp == (1 << L.exp_bits) - 1) {
        if (man != 0) return std::numeric_limits<double>::quiet_NaN();
        v = inf_as_next ? std::ldexp(1.0, exp - L.bias) : std::numeric_limits<double>::infinity();
    } else if (exp == 0) {
        v = std::ldexp(double(man), 1 - L.bias - L.man_bits);
    } else {
        v = std::ldexp(double(man + (1 << L.man_bits)), exp - L.bias - L.man_bits);
    }
    return sign ? -v : v;
}

std::uint16_t max_finite(const Layout& L) {
    return std::uint16_t((((1 << L.exp_bits) - 1) << L.man_bits) - 1);
}

// Nearest pattern to |f| (ties to even mantissa), by binary search over the
// monotonic positive patterns; values at or past the midpoint above max go to Inf.
std::uint16_t nearest(const Layout& L, double f) {
    double a = std::fabs(f);
    std::uint16_t inf = std::uint16_t(max_finite(L) + 1);
    std::uint16_t lo = 0, hi = inf;  // oracle(lo) <= a < oracle(hi)
    if (a >= oracle(L, inf, true)) {
        lo = inf;
    } else {
        while (hi - lo > 1) {
            std::uint16_t mid = std::uint16_t((lo + hi) / 2);
            if (oracle(L, mid) <= a) lo = mid; else hi = mid;
        }
        double dlo = a - oracle(L, lo), dhi = oracle(L, hi, true) - a;
        if (dhi < dlo || (dhi == dlo && (lo & 1))) lo = hi;
    }
    return std::uint16_t(lo | (std::signbit(f) ? 0x8000 : 0));
}

void check_widening(const Layout& L, float (*widen)(std::uint16_t)) {
    for (std::uint32_t b = 0; b < 65536; ++b) {
        double expect = oracle(L, std::uint16_t(b));
        float got = widen(std::uint16_t(b));
        if (std::isnan(expect)) {
            ASSERT_TRUE(std::isnan(got)) << std::hex << b;
            continue;
        }
        ASSERT_EQ(double(got), expect) << std::hex << b;
        ASSERT_EQ(std::signbit(got), bool(b & 0x8000)) << std::hex << b;
    }
}

void check_round_trip(const Layout& L, float (*widen)(std::uint16_t), std::uint16_t (*narrow)(float)) {
    for (std::uint32_t b = 0; b < 65536; ++b) {
        std::uint16_t h = std::uint16_t(b);
        std::uint16_t back = narrow(widen(h));
        if (std::isnan(oracle(L, h))) {
            ASSERT_TRUE(std::isnan(oracle(L, back))) << std::hex << b;
            ASSERT_EQ(back & 0x8000, h & 0x8000) << std::hex << b;
        } else {
            ASSERT_EQ(back, h) << std::hex << b;
        }
    }
}

// Every midpoint between neighbouring magnitudes (and past max, towards Inf), and the
// float32 neighbours on either side of it.
void check_ties(const Layout& L, std::uint16_t (*narrow)(float)) {
    for (std::uint16_t sign : {0x0000, 0x8000}) {
        for (std::uint32_t b = 0; b <= max_finite(L); ++b) {
            std::uint16_t lo = std::uint16_t(b | sign), hi = std::uint16_t((b + 1) | sign);
            double mid = (oracle(L, lo) + oracle(L, hi, true)) / 2;
            float f = float(mid);
            ASSERT_EQ(double(f), mid) << "midpoint not a float32 at " << std::hex << b;
            std::uint16_t even = (b & 1) ? hi : lo;
            ASSERT_EQ(narrow(f), even) << std::hex << b;
            float toward_lo = std::nextafter(f, 0.0f);
            float toward_hi = std::nextafter(f, sign ? -INFINITY : INFINITY);
            ASSERT_EQ(narrow(toward_lo), lo) << std::hex << b;
            ASSERT_EQ(narrow(toward_hi), hi) << std::hex << b;
        }
    }
}

void check_random(const Layout& L, std::uint16_t (*narrow)(float)) {
    std::mt19937 rng(1234);
    for (int i = 0; i < 200000; ++i) {
        float f = std::bit_cast<float>(std::uint32_t(rng()));
        if (std::isnan(f)) continue;
        ASSERT_EQ(narrow(f), nearest(L, f)) << std::hexfloat << f;
    }
}

void check_specials(const Layout& L, std::uint16_t (*narrow)(float)) {
    std::uint16_t inf = std::uint16_t(max_finite(L) + 1);
    EXPECT_EQ(narrow(INFINITY), inf);
    EXPECT_EQ(narrow(-INFINITY), inf | 0x8000);
    EXPECT_EQ(narrow(0.0f), 0);
    EXPECT_EQ(narrow(-0.0f), 0x8000);
    EXPECT_EQ(narrow(std::numeric_limits<float>::max()), inf);
    EXPECT_EQ(narrow(std::numeric_limits<float>::denorm_min()), 0);
    EXPECT_EQ(narrow(-std::numeric_limits<float>::denorm_min()), 0x8000);
    // NaNs whose payload sits only in bits that narrowing drops must stay NaN.
    for (std::uint32_t bits : {0x7FC00000u, 0x7F800001u, 0xFF800001u, 0x7FFFFFFFu, 0x7F802000u}) {
        std::uint16_t n = narrow(std::bit_cast<float>(bits));
        EXPECT_TRUE(std::isnan(oracle(L, n))) << std::hex << bits;
        EXPECT_EQ(n & 0x8000, (bits >> 16) & 0x8000) << std::hex << bits;
    }
}

}  // namespace

TEST(Half, WideningIsExactForAllPatterns) { check_widening(kHalf, half_to_float); }
TEST(Bf16, WideningIsExactForAllPatterns) { check_widening(kBf16, bf16_to_float); }

TEST(Half, HandCheckedValues) {
    EXPECT_EQ(half_to_float(0x3C00), 1.0f);
    EXPECT_EQ(half_to_float(0xC000), -2.0f);
    EXPECT_EQ(half_to_float(0x7BFF), 65504.0f);
    EXPECT_EQ(half_to_float(0x0001), std::ldexp(1.0f, -24));
    EXPECT_EQ(half_to_float(0x0400), std::ldexp(1.0f, -14));
    EXPECT_EQ(half_to_float(0x3555), 0.333251953125f);
    EXPECT_EQ(float_to_half(65519.99f), 0x7BFF);
    EXPECT_EQ(float_to_half(65520.0f), 0x7C00);  // tie past max goes to Inf (even)
    EXPECT_EQ(float_to_half(std::ldexp(1.0f, -25)), 0x0000);  // tie with zero
    EXPECT_EQ(float_to_half(std::ldexp(1.5f, -25)), 0x0001);
}

TEST(Bf16, HandCheckedValues) {
    EXPECT_EQ(bf16_to_float(0x3F80), 1.0f);
    EXPECT_EQ(bf16_to_float(0x4049), 3.140625f);
    EXPECT_EQ(bf16_to_float(0x7F7F), 0x1.FEp127f);
    EXPECT_EQ(float_to_bf16(1.00390625f), 0x3F80);   // 1 + 2^-8: tie, stays even
    EXPECT_EQ(float_to_bf16(1.01171875f), 0x3F82);   // 1 + 3*2^-8: tie, rounds up to even
    EXPECT_EQ(float_to_bf16(0x1.FFp127f), 0x7F80);   // tie past max: Inf
}

TEST(Half, NarrowingRoundTripsEveryPattern) { check_round_trip(kHalf, half_to_float, float_to_half); }
TEST(Bf16, NarrowingRoundTripsEveryPattern) { check_round_trip(kBf16, bf16_to_float, float_to_bf16); }
TEST(Half, NarrowingTiesGoToEven) { check_ties(kHalf, float_to_half); }
TEST(Bf16, NarrowingTiesGoToEven) { check_ties(kBf16, float_to_bf16); }
TEST(Half, NarrowingRandomMatchesNearestSearch) { check_random(kHalf, float_to_half); }
TEST(Bf16, NarrowingRandomMatchesNearestSearch) { check_random(kBf16, float_to_bf16); }
TEST(Half, NarrowingSpecials) { check_specials(kHalf, float_to_half); }
TEST(Bf16, NarrowingSpecials) { check_specials(kBf16, float_to_bf16); }

TEST(DoubleToFloat, RoundsAndOverflowsToInf) {
    constexpr float kMax = std::numeric_limits<float>::max();
    EXPECT_EQ(double_to_float(0.1), 0.1f);
    EXPECT_EQ(double_to_float(double(kMax)), kMax);
    EXPECT_EQ(double_to_float(0x1.fffffefffffffp127), kMax);  // just below the tie
    EXPECT_EQ(double_to_float(0x1.ffffffp127), INFINITY);     // the tie: max is odd
    EXPECT_EQ(double_to_float(-0x1.ffffffp127), -INFINITY);
    EXPECT_EQ(double_to_float(1e300), INFINITY);
    EXPECT_EQ(double_to_float(-1e300), -INFINITY);
    EXPECT_EQ(double_to_float(-INFINITY), -INFINITY);
    EXPECT_TRUE(std::isnan(double_to_float(NAN)));
    EXPECT_EQ(double_to_float(1.0 + 0x1p-24), 1.0f);          // tie to even
    EXPECT_EQ(double_to_float(1.0 + 0x3p-24), 1.0f + 0x1p-22f);
    EXPECT_EQ(double_to_float(0x1p-150), 0.0f);               // tie with the smallest subnormal
    EXPECT_EQ(double_to_float(0x1.8p-150), 0x1p-149f);
}
