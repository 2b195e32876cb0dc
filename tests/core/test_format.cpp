// E4M3, E5M2 and E8M0 against an oracle built here from the bit layouts of FP8.md alone:
// each code's value from its fields with std::ldexp in double, and encoding as the
// brute-force nearest representable value (ties to the even code), with the code just
// past max included so that rounding decides what overflows.
#include <gtest/gtest.h>

#include <bit>
#include <cfloat>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "fp8/format.h"

using namespace fp8scope;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

struct Layout {
    int exp_bits, mant_bits, bias;
};
Layout layout(Format f) { return f == Format::E4M3 ? Layout{4, 3, 7} : Layout{5, 2, 15}; }

// Magnitude of the low 7 bits read as a plain binary float, ignoring NaN/Inf encodings.
// Past the top of the format this is the "unbounded" extension used to decide overflow.
double field_value(Format f, int mag_code) {
    const Layout l = layout(f);
    const int e = mag_code >> l.mant_bits;
    const int m = mag_code & ((1 << l.mant_bits) - 1);
    if (e == 0) return std::ldexp(static_cast<double>(m), 1 - l.bias - l.mant_bits);
    return std::ldexp(static_cast<double>((1 << l.mant_bits) + m), e - l.bias - l.mant_bits);
}

// What a code means per FP8.md: E4M3 NaN = S.1111.111 only, no Inf; E5M2 IEEE-like.
double oracle_value(Format f, std::uint8_t code) {
    const int mag = code & 0x7F;
    const bool neg = code & 0x80;
    double v;
    if (f == Format::E4M3 && mag == 0x7F) v = kNaN;
    else if (f == Format::E5M2 && (mag >> 2) == 0x1F) v = (mag & 3) == 0 ? kInf : kNaN;
    else v = field_value(f, mag);
    return neg ? -v : v;
}

// Largest finite magnitude code, and the overflow codes written from the table of FP8.md.
int max_code(Format f) { return f == Format::E4M3 ? 0x7E : 0x7B; }
std::uint8_t nan_code(Format f, bool neg) { return (f == Format::E4M3 ? 0x7F : 0x7E) | (neg ? 0x80 : 0); }
std::uint8_t overflow_code(Format f, bool neg, Overflow mode) {
    const std::uint8_t s = neg ? 0x80 : 0;
    if (mode == Overflow::Saturate) return static_cast<std::uint8_t>(max_code(f) | s);
    return f == Format::E4M3 ? nan_code(f, neg) : static_cast<std::uint8_t>(0x7C | s);
}

// Magnitudes of codes 0..max_code+1; the last one is the first value past max.
struct Candidates {
    std::vector<double> mags;
    explicit Candidates(Format f) {
        for (int c = 0; c <= max_code(f) + 1; ++c) mags.push_back(field_value(f, c));
    }
};
const Candidates& candidates(Format f) {
    static const Candidates e4m3(Format::E4M3), e5m2(Format::E5M2);
    return f == Format::E4M3 ? e4m3 : e5m2;
}

// Brute-force nearest magnitude code for a finite a >= 0: scan every candidate, and on a
// tie keep the even code (even mantissa). Returns max_code + 1 when the value overflows.
int oracle_nearest(Format f, double a) {
    const std::vector<double>& mags = candidates(f).mags;
    const int past_max = static_cast<int>(mags.size()) - 1;
    // At or beyond the first value past max, that value or a larger one is nearest.
    if (a >= mags[past_max]) return past_max;
    int best = 0;
    double best_d = kInf;
    for (int k = 0; k <= past_max; ++k) {
        const double d = std::fabs(mags[k] - a);
        if (d < best_d || (d == best_d && k % 2 == 0)) {
            best = k;
            best_d = d;
        }
    }
    return best;
}

std::uint8_t code_for(Format f, bool neg, int nearest, Overflow mode) {
    if (nearest > max_code(f)) return overflow_code(f, neg, mode);
    return static_cast<std::uint8_t>(nearest | (neg ? 0x80 : 0));
}

std::uint8_t oracle_encode(Format f, float x, Overflow mode) {
    const bool neg = std::signbit(x);
    if (std::isnan(x)) return nan_code(f, neg);
    if (std::isinf(x)) return overflow_code(f, neg, mode);
    return code_for(f, neg, oracle_nearest(f, std::fabs(static_cast<double>(x))), mode);
}

float from_bits(std::uint32_t u) {
    float x;
    std::memcpy(&x, &u, sizeof x);
    return x;
}

const Format kFormats[] = {Format::E4M3, Format::E5M2};
const Overflow kModes[] = {Overflow::Saturate, Overflow::NonSaturate};

std::string fmt_name(Format f) { return f == Format::E4M3 ? "e4m3" : "e5m2"; }

// Encodes x and compares with the oracle in both modes; returns false on the first mismatch.
::testing::AssertionResult matches_oracle(Format f, float x) {
    // One scan serves both modes; NaN and Inf take the direct path.
    const int nearest = std::isfinite(x) ? oracle_nearest(f, std::fabs(static_cast<double>(x))) : -1;
    for (Overflow mode : kModes) {
        const int got = encode(f, x, mode);
        const int want = nearest < 0 ? oracle_encode(f, x, mode) : code_for(f, std::signbit(x), nearest, mode);
        if (got != want) {
            return ::testing::AssertionFailure()
                   << fmt_name(f) << (mode == Overflow::Saturate ? " sat" : " nonsat") << " x=" << std::hexfloat
                   << x << " got 0x" << std::hex << got << " want 0x" << want;
        }
    }
    return ::testing::AssertionSuccess();
}

}  // namespace

TEST(Format, InfoMatchesTheSpecTable) {
    const FormatInfo& a = info(Format::E4M3);
    EXPECT_EQ(a.name, "e4m3");
    EXPECT_EQ(a.exponent_bits, 4);
    EXPECT_EQ(a.mantissa_bits, 3);
    EXPECT_EQ(a.bias, 7);
    EXPECT_EQ(a.max, 448.0f);
    EXPECT_EQ(a.min_normal, 0x1p-6f);
    EXPECT_EQ(a.min_subnormal, 0x1p-9f);
    EXPECT_EQ(a.emax, 8);
    const FormatInfo& b = info(Format::E5M2);
    EXPECT_EQ(b.name, "e5m2");
    EXPECT_EQ(b.exponent_bits, 5);
    EXPECT_EQ(b.mantissa_bits, 2);
    EXPECT_EQ(b.bias, 15);
    EXPECT_EQ(b.max, 57344.0f);
    EXPECT_EQ(b.min_normal, 0x1p-14f);
    EXPECT_EQ(b.min_subnormal, 0x1p-16f);
    EXPECT_EQ(b.emax, 15);
    for (Format f : kFormats) {
        // The oracle agrees on the extremes, and fp8_max() on max.
        EXPECT_EQ(info(f).max, oracle_value(f, static_cast<std::uint8_t>(max_code(f))));
        EXPECT_EQ(fp8_max(f), info(f).max);
        EXPECT_EQ(info(f).min_subnormal, oracle_value(f, 0x01));
        EXPECT_EQ(info(f).min_normal, oracle_value(f, static_cast<std::uint8_t>(1 << info(f).mantissa_bits)));
        EXPECT_EQ(std::ldexp(1.0, info(f).emax), std::exp2(std::floor(std::log2(info(f).max))));
        EXPECT_EQ(name(f), info(f).name);
    }
}

TEST(Format, ParseFormat) {
    Format f = Format::E5M2;
    EXPECT_TRUE(parse_format("e4m3", f));
    EXPECT_EQ(f, Format::E4M3);
    EXPECT_TRUE(parse_format("e5m2", f));
    EXPECT_EQ(f, Format::E5M2);
    for (const char* bad : {"", "E4M3", "e4m3fn", "e5m3", " e4m3"}) {
        f = Format::E4M3;
        EXPECT_FALSE(parse_format(bad, f)) << bad;
        EXPECT_EQ(f, Format::E4M3) << "unchanged on failure: " << bad;
    }
}

TEST(Format, HandCheckedCodes) {
    // A few values worked out by hand from the layouts, so the oracle is checked too.
    EXPECT_EQ(oracle_value(Format::E4M3, 0x7E), 448.0);
    EXPECT_EQ(oracle_value(Format::E4M3, 0x08), 0x1p-6);
    EXPECT_EQ(oracle_value(Format::E4M3, 0x01), 0x1p-9);
    EXPECT_EQ(oracle_value(Format::E4M3, 0x38), 1.0);
    EXPECT_EQ(oracle_value(Format::E4M3, 0xC4), -3.0);
    EXPECT_EQ(oracle_value(Format::E5M2, 0x7B), 57344.0);
    EXPECT_EQ(oracle_value(Format::E5M2, 0x3C), 1.0);
    EXPECT_EQ(oracle_value(Format::E5M2, 0x01), 0x1p-16);
    EXPECT_EQ(oracle_value(Format::E5M2, 0x04), 0x1p-14);
    EXPECT_EQ(field_value(Format::E4M3, 0x7F), 480.0);    // first value past E4M3 max
    EXPECT_EQ(field_value(Format::E5M2, 0x7C), 65536.0);  // first value past E5M2 max
    for (Format f : kFormats) {
        EXPECT_EQ(decode(f, 0x38 + (f == Format::E5M2 ? 4 : 0)), 1.0f);
        EXPECT_EQ(encode(f, 1.0f), f == Format::E4M3 ? 0x38 : 0x3C);
    }
    EXPECT_EQ(encode(Format::E4M3, -3.0f), 0xC4);
    EXPECT_EQ(encode(Format::E4M3, 0.1f), 0x1D);  // 0.1 -> 1.625 * 2^-4 = 0.1015625
    EXPECT_EQ(encode(Format::E5M2, 0.1f), 0x2E);  // 0.1 -> 1.5 * 2^-4 = 0.09375
}

TEST(Format, AllCodesDecode) {
    for (Format f : kFormats) {
        const float* table = decode_table(f);
        for (int c = 0; c < 256; ++c) {
            const auto code = static_cast<std::uint8_t>(c);
            const double want = oracle_value(f, code);
            const float got = decode(f, code);
            SCOPED_TRACE(fmt_name(f) + " code " + std::to_string(c));
            EXPECT_EQ(std::bit_cast<std::uint32_t>(table[c]), std::bit_cast<std::uint32_t>(got));
            if (std::isnan(want)) {
                EXPECT_TRUE(std::isnan(got));
            } else {
                EXPECT_EQ(static_cast<double>(got), want);
                EXPECT_EQ(std::signbit(got), (c & 0x80) != 0);  // -0 for 0x80
            }
        }
    }
}

TEST(Format, FiniteCodesRoundTripAndNaNStaysNaN) {
    for (Format f : kFormats) {
        for (Overflow mode : kModes) {
            for (int c = 0; c < 256; ++c) {
                const auto code = static_cast<std::uint8_t>(c);
                SCOPED_TRACE(fmt_name(f) + " code " + std::to_string(c));
                const std::uint8_t back = encode(f, decode(f, code), mode);
                const double v = oracle_value(f, code);
                if (std::isfinite(v)) {
                    EXPECT_EQ(back, code);
                } else if (std::isnan(v)) {
                    EXPECT_EQ(back, nan_code(f, c & 0x80));
                    EXPECT_TRUE(std::isnan(decode(f, back)));
                } else {  // E5M2 +-Inf
                    EXPECT_EQ(back, mode == Overflow::Saturate ? (0x7B | (c & 0x80)) : c);
                }
            }
        }
    }
}

TEST(Format, IsFiniteCode) {
    for (Format f : kFormats) {
        int non_finite = 0;
        for (int c = 0; c < 256; ++c) {
            const auto code = static_cast<std::uint8_t>(c);
            EXPECT_EQ(is_finite_code(f, code), std::isfinite(oracle_value(f, code))) << fmt_name(f) << " " << c;
            non_finite += !is_finite_code(f, code);
        }
        // E4M3: 0x7F, 0xFF. E5M2: 3 NaN and 1 Inf per sign.
        EXPECT_EQ(non_finite, f == Format::E4M3 ? 2 : 8);
    }
}

TEST(Format, MidpointsTieToEvenAndNeighboursRoundAway) {
    for (Format f : kFormats) {
        const std::vector<double>& mags = candidates(f).mags;
        const int n = static_cast<int>(mags.size());
        for (int k = 0; k + 1 < n; ++k) {
            // Two neighbours have at most 4 significant bits, their midpoint 5: exact in float.
            const double mid_d = (mags[k] + mags[k + 1]) / 2;
            const float mid = static_cast<float>(mid_d);
            ASSERT_EQ(static_cast<double>(mid), mid_d);
            const bool upper_is_past_max = k + 1 == n - 1;
            const int even = k % 2 == 0 ? k : k + 1;
            for (bool neg : {false, true}) {
                const std::uint8_t s = neg ? 0x80 : 0;
                const float m = neg ? -mid : mid;
                const float above = std::nextafter(m, neg ? -INFINITY : INFINITY);
                const float below = std::nextafter(m, 0.0f);
                SCOPED_TRACE(fmt_name(f) + " between codes " + std::to_string(k) + " and " + std::to_string(k + 1));
                EXPECT_TRUE(matches_oracle(f, m));
                EXPECT_TRUE(matches_oracle(f, above));
                EXPECT_TRUE(matches_oracle(f, below));
                // The same facts stated directly, not through the scan.
                for (Overflow mode : kModes) {
                    const bool tie_overflows = upper_is_past_max && even == k + 1;
                    EXPECT_EQ(encode(f, m, mode), tie_overflows ? overflow_code(f, neg, mode) : (even | s));
                    EXPECT_EQ(encode(f, below, mode), k | s);
                    EXPECT_EQ(encode(f, above, mode), upper_is_past_max ? overflow_code(f, neg, mode) : ((k + 1) | s));
                }
            }
        }
    }
}

TEST(Format, Subnormals) {
    for (Format f : kFormats) {
        const Layout l = layout(f);
        const double tiny = std::ldexp(1.0, 1 - l.bias - l.mant_bits);
        for (int m = 0; m < (1 << l.mant_bits); ++m) {
            const float v = static_cast<float>(m * tiny);
            EXPECT_EQ(encode(f, v), m) << fmt_name(f) << " subnormal " << m;
            EXPECT_EQ(encode(f, -v), 0x80 | m) << fmt_name(f) << " subnormal -" << m;
            EXPECT_EQ(decode(f, static_cast<std::uint8_t>(m)), v);
        }
        // Below half the smallest subnormal everything is zero; above it, the smallest subnormal.
        EXPECT_EQ(encode(f, static_cast<float>(tiny * 0.25)), 0x00);
        EXPECT_EQ(encode(f, static_cast<float>(tiny * 0.5)), 0x00);  // tie to even (zero)
        EXPECT_EQ(encode(f, std::nextafter(static_cast<float>(tiny * 0.5), 1.0f)), 0x01);
        EXPECT_EQ(encode(f, -static_cast<float>(tiny * 0.25)), 0x80);
        EXPECT_EQ(encode(f, static_cast<float>(tiny * 1.5)), 0x02);  // tie to even (2)
        EXPECT_EQ(encode(f, static_cast<float>(tiny * 2.5)), 0x02);  // tie to even (2)
        // The largest subnormal rounds up into the smallest normal.
        const int top = (1 << l.mant_bits) - 1;
        EXPECT_EQ(encode(f, static_cast<float>((top + 0.75) * tiny)), 1 << l.mant_bits);
    }
}

TEST(Format, PastMax) {
    for (Overflow mode : kModes) {
        const bool sat = mode == Overflow::Saturate;
        SCOPED_TRACE(sat ? "saturate" : "non-saturate");
        // E4M3: [448, 464] rounds to 448 in both modes; beyond 464 overflows.
        for (float x : {448.0f, 450.0f, 463.99f, 464.0f}) {
            EXPECT_EQ(encode(Format::E4M3, x, mode), 0x7E) << x;
            EXPECT_EQ(encode(Format::E4M3, -x, mode), 0xFE) << x;
        }
        for (float x : {std::nextafter(464.0f, 1e9f), 465.0f, 480.0f, 1000.0f, 57344.0f, 1e30f, FLT_MAX}) {
            EXPECT_EQ(encode(Format::E4M3, x, mode), sat ? 0x7E : 0x7F) << x;
            EXPECT_EQ(encode(Format::E4M3, -x, mode), sat ? 0xFE : 0xFF) << x;
        }
        // E5M2: below 61440 rounds to 57344; 61440 and above overflows.
        for (float x : {57344.0f, 60000.0f, std::nextafter(61440.0f, 0.0f)}) {
            EXPECT_EQ(encode(Format::E5M2, x, mode), 0x7B) << x;
            EXPECT_EQ(encode(Format::E5M2, -x, mode), 0xFB) << x;
        }
        for (float x : {61440.0f, 65536.0f, 1e6f, 1e30f, FLT_MAX}) {
            EXPECT_EQ(encode(Format::E5M2, x, mode), sat ? 0x7B : 0x7C) << x;
            EXPECT_EQ(encode(Format::E5M2, -x, mode), sat ? 0xFB : 0xFC) << x;
        }
    }
}

TEST(Format, ZerosInfinitiesAndNaN) {
    const float nans[] = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::signaling_NaN(),
                          from_bits(0x7F800001u), from_bits(0x7FFFFFFFu), from_bits(0x7FC12345u)};
    for (Format f : kFormats) {
        for (Overflow mode : kModes) {
            SCOPED_TRACE(fmt_name(f) + (mode == Overflow::Saturate ? " sat" : " nonsat"));
            EXPECT_EQ(encode(f, 0.0f, mode), 0x00);
            EXPECT_EQ(encode(f, -0.0f, mode), 0x80);
            for (float n : nans) {
                EXPECT_EQ(encode(f, n, mode), f == Format::E4M3 ? 0x7F : 0x7E);
                EXPECT_EQ(encode(f, -n, mode), f == Format::E4M3 ? 0xFF : 0xFE);
            }
            const bool sat = mode == Overflow::Saturate;
            const int pos_inf = sat ? max_code(f) : (f == Format::E4M3 ? 0x7F : 0x7C);
            EXPECT_EQ(encode(f, INFINITY, mode), pos_inf);
            EXPECT_EQ(encode(f, -INFINITY, mode), pos_inf | 0x80);
        }
        EXPECT_TRUE(std::signbit(decode(f, 0x80)));
        EXPECT_EQ(decode(f, 0x80), 0.0f);
        EXPECT_FALSE(std::signbit(decode(f, 0x00)));
    }
    EXPECT_EQ(decode(Format::E5M2, 0x7C), INFINITY);
    EXPECT_EQ(decode(Format::E5M2, 0xFC), -INFINITY);
    for (int c : {0x7D, 0x7E, 0x7F, 0xFD, 0xFE, 0xFF}) EXPECT_TRUE(std::isnan(decode(Format::E5M2, c))) << c;
    EXPECT_TRUE(std::isnan(decode(Format::E4M3, 0x7F)));
    EXPECT_TRUE(std::isnan(decode(Format::E4M3, 0xFF)));
}

TEST(Format, Float32ExtremesAndSubnormals) {
    const float smalls[] = {std::numeric_limits<float>::denorm_min(), from_bits(0x00400000u),
                            from_bits(0x007FFFFFu), FLT_MIN, 1e-30f};
    for (Format f : kFormats) {
        for (float x : smalls) {
            EXPECT_EQ(encode(f, x), 0x00) << x;
            EXPECT_EQ(encode(f, -x), 0x80) << x;
            EXPECT_EQ(encode(f, x, Overflow::NonSaturate), 0x00) << x;
            EXPECT_TRUE(matches_oracle(f, x));
            EXPECT_TRUE(matches_oracle(f, -x));
        }
        EXPECT_TRUE(matches_oracle(f, FLT_MAX));
        EXPECT_TRUE(matches_oracle(f, -FLT_MAX));
        EXPECT_EQ(encode(f, FLT_MAX), max_code(f));
        EXPECT_EQ(encode(f, -FLT_MAX), max_code(f) | 0x80);
    }
}

// Strided walks over float32 bit patterns. The first covers every float32 (both signs, NaN,
// Inf, subnormals); the second the binades where FP8 values live, more densely.
TEST(Format, DenseSweepMatchesOracle) {
    std::int64_t checked = 0;
    const auto walk = [&](std::uint64_t begin, std::uint64_t end, std::uint64_t stride) {
        for (std::uint64_t u = begin; u < end; u += stride) {
            const float x = from_bits(static_cast<std::uint32_t>(u));
            for (Format f : kFormats) {
                const auto r = matches_oracle(f, x);
                if (!r) {
                    ADD_FAILURE() << r.message();
                    return;
                }
            }
            ++checked;
        }
    };
    walk(0, 1ull << 32, 2039);  // whole range, odd stride so every low bit pattern appears
    // |x| in [2^-18, 2^17): exponent fields 109..143, both signs.
    for (std::uint64_t sign : {0ull, 0x80000000ull}) walk(sign | (109ull << 23), sign | (144ull << 23), 307);
    EXPECT_GT(checked, 3000000);
}

TEST(E8M0, AllCodes) {
    for (int c = 0; c < 255; ++c) {
        const float v = e8m0_decode(static_cast<std::uint8_t>(c));
        EXPECT_EQ(static_cast<double>(v), std::ldexp(1.0, c - 127)) << c;  // 2^-127 is a float32 subnormal
    }
    EXPECT_TRUE(std::isnan(e8m0_decode(kE8M0NaN)));
    EXPECT_EQ(kE8M0NaN, 0xFF);
    EXPECT_EQ(e8m0_decode(127), 1.0f);
    EXPECT_EQ(e8m0_decode(0), 0x1p-127f);
    EXPECT_EQ(e8m0_decode(254), 0x1p127f);
}

TEST(E8M0, FromExponentClamps) {
    for (int e = -127; e <= 127; ++e) {
        EXPECT_EQ(e8m0_from_exponent(e), e + 127) << e;
        EXPECT_EQ(static_cast<double>(e8m0_decode(e8m0_from_exponent(e))), std::ldexp(1.0, e)) << e;
    }
    for (int e : {-128, -200, -1000, INT_MIN}) EXPECT_EQ(e8m0_from_exponent(e), 0x00) << e;
    // The top clamps to 2^127, never to the NaN code.
    for (int e : {128, 200, 1000, INT_MAX}) EXPECT_EQ(e8m0_from_exponent(e), 0xFE) << e;
}
