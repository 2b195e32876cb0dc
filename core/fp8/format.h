// FP8 element formats (E4M3 "e4m3fn", E5M2) and the E8M0 scale format of MX.
// Encoding is round-to-nearest-even with subnormals, from float32, exactly as the OCP
// 8-bit float specification defines it. Decoding goes through 256-entry tables.
#pragma once

#include <cstdint>
#include <string_view>

namespace fp8scope {

enum class Format : std::uint8_t { E4M3, E5M2 };

// What happens to finite values beyond the largest finite code.
enum class Overflow : std::uint8_t {
    Saturate,     // clamp to +-max (what training recipes use)
    NonSaturate,  // NaN for E4M3, +-Inf for E5M2 (ml_dtypes / PyTorch .to(float8))
};

struct FormatInfo {
    std::string_view name;  // "e4m3", "e5m2"
    int exponent_bits;
    int mantissa_bits;
    int bias;
    float max;             // largest finite value
    float min_normal;
    float min_subnormal;
    int emax;              // exponent of the largest power of two <= max (8 or 15)
};

const FormatInfo& info(Format f);
constexpr float fp8_max(Format f) { return f == Format::E4M3 ? 448.0f : 57344.0f; }
std::string_view name(Format f);
// Parses "e4m3" or "e5m2"; returns false on anything else.
bool parse_format(std::string_view s, Format& out);

// One value to its code. NaN input gives the canonical NaN code of the format with the
// input's sign (E4M3 0x7F/0xFF, E5M2 0x7E/0xFE); +-Inf gives +-max when saturating, the
// format's NaN (E4M3) or +-Inf (E5M2) otherwise.
std::uint8_t encode(Format f, float x, Overflow mode = Overflow::Saturate);
float decode(Format f, std::uint8_t code);

// The table behind decode(): all 256 values of a format as float32.
const float* decode_table(Format f);

// True when the code is NaN (or Inf for E5M2): the codes that are not finite.
bool is_finite_code(Format f, std::uint8_t code);

// E8M0: a biased power-of-two exponent, 2^(code-127); 0xFF is NaN. No zero, no sign.
constexpr std::uint8_t kE8M0NaN = 0xFF;
// Code of 2^e, clamped to the representable range [-127, 127].
std::uint8_t e8m0_from_exponent(int e);
float e8m0_decode(std::uint8_t code);  // NaN for 0xFF

}  // namespace fp8scope
