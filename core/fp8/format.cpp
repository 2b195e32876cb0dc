// Scalar, exact FP8 encode/decode. Rounding is done in double, where every float32 and
// every FP8 value is exact, so the code stays short and obviously right; hot loops use
// the bit-level cast of cast_rules.h, which is tested against this.
#include "fp8/format.h"

#include <array>
#include <cmath>
#include <limits>

namespace fp8scope {
namespace {

constexpr FormatInfo kE4M3{"e4m3", 4, 3, 7, 448.0f, 0x1p-6f, 0x1p-9f, 8};
constexpr FormatInfo kE5M2{"e5m2", 5, 2, 15, 57344.0f, 0x1p-14f, 0x1p-16f, 15};

// Value of a code from its bits; NaN and Inf as the format defines them.
float value_of(Format f, std::uint8_t code) {
    const FormatInfo& fi = info(f);
    const int mant_mask = (1 << fi.mantissa_bits) - 1;
    const int exp_max = (1 << fi.exponent_bits) - 1;
    const bool negative = code & 0x80;
    const int exp = (code & 0x7F) >> fi.mantissa_bits;
    const int mant = code & mant_mask;
    float v;
    if (f == Format::E4M3 && exp == exp_max && mant == mant_mask) {
        v = std::numeric_limits<float>::quiet_NaN();
    } else if (f == Format::E5M2 && exp == exp_max) {
        v = mant == 0 ? std::numeric_limits<float>::infinity() : std::numeric_limits<float>::quiet_NaN();
    } else if (exp == 0) {
        v = std::ldexp(static_cast<float>(mant), 1 - fi.bias - fi.mantissa_bits);
    } else {
        v = std::ldexp(static_cast<float>(mant_mask + 1 + mant), exp - fi.bias - fi.mantissa_bits);
    }
    return negative ? -v : v;
}

using Table = std::array<float, 256>;

Table make_table(Format f) {
    Table t{};
    for (int c = 0; c < 256; ++c) t[c] = value_of(f, static_cast<std::uint8_t>(c));
    return t;
}

const Table& table(Format f) {
    static const Table e4m3 = make_table(Format::E4M3);
    static const Table e5m2 = make_table(Format::E5M2);
    return f == Format::E4M3 ? e4m3 : e5m2;
}

std::uint8_t nan_code(Format f, bool negative) {
    return static_cast<std::uint8_t>((f == Format::E4M3 ? 0x7F : 0x7E) | (negative ? 0x80 : 0));
}

std::uint8_t overflow_code(Format f, bool negative, Overflow mode) {
    const std::uint8_t sign = negative ? 0x80 : 0;
    if (mode == Overflow::Saturate) return static_cast<std::uint8_t>((f == Format::E4M3 ? 0x7E : 0x7B) | sign);
    return f == Format::E4M3 ? nan_code(f, negative) : static_cast<std::uint8_t>(0x7C | sign);
}

}  // namespace

const FormatInfo& info(Format f) { return f == Format::E4M3 ? kE4M3 : kE5M2; }

std::string_view name(Format f) { return info(f).name; }

bool parse_format(std::string_view s, Format& out) {
    if (s == "e4m3") out = Format::E4M3;
    else if (s == "e5m2") out = Format::E5M2;
    else return false;
    return true;
}

std::uint8_t encode(Format f, float x, Overflow mode) {
    const bool negative = std::signbit(x);
    if (std::isnan(x)) return nan_code(f, negative);
    if (std::isinf(x)) return overflow_code(f, negative, mode);

    const FormatInfo& fi = info(f);
    const double a = std::fabs(static_cast<double>(x));
    // Spacing of representable values around a: fixed below min_normal (subnormals).
    int e = std::ilogb(a);  // floor(log2 a) for a > 0
    if (a == 0.0 || e < 1 - fi.bias) e = 1 - fi.bias;
    const double ulp = std::ldexp(1.0, e - fi.mantissa_bits);
    const double r = std::nearbyint(a / ulp) * ulp;  // ties to even under the default mode
    if (r > fi.max) return overflow_code(f, negative, mode);

    const std::uint8_t sign = negative ? 0x80 : 0;
    if (r < fi.min_normal) {
        return static_cast<std::uint8_t>(sign | static_cast<int>(r / fi.min_subnormal));
    }
    const int re = std::ilogb(r);  // rounding may have carried into the next binade
    const int mant = static_cast<int>(std::ldexp(r, fi.mantissa_bits - re)) - (1 << fi.mantissa_bits);
    return static_cast<std::uint8_t>(sign | ((re + fi.bias) << fi.mantissa_bits) | mant);
}

float decode(Format f, std::uint8_t code) { return table(f)[code]; }

const float* decode_table(Format f) { return table(f).data(); }

bool is_finite_code(Format f, std::uint8_t code) { return std::isfinite(table(f)[code]); }

std::uint8_t e8m0_from_exponent(int e) {
    if (e < -127) e = -127;
    if (e > 127) e = 127;
    return static_cast<std::uint8_t>(e + 127);
}

float e8m0_decode(std::uint8_t code) {
    if (code == kE8M0NaN) return std::numeric_limits<float>::quiet_NaN();
    return std::ldexp(1.0f, static_cast<int>(code) - 127);
}

}  // namespace fp8scope
