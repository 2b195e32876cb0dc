// The maximum over ranks of float32 values, taken as the maximum of integer keys so that a
// NaN on any rank reaches every rank. A float max (NCCL's ncclMax on floats is fmaxf's,
// std::max depends on the operands' order) may return the other operand of a NaN, and a
// device's flush-to-zero may change a denormal; an integer max of these keys does
// neither. The keys order every float: -NaN and +NaN (any payload) become the one quiet
// NaN, above +Inf; -Inf < ... < -0 < +0 < ... < +Inf < NaN. A key maps back to the same
// bits, so the maximum of the keys is one rank's value, exactly (a NaN becomes the quiet
// NaN 0x7FC00000 on every rank). The CPU ranks' communicator and the CUDA kernels
// around NCCL's integer max share these two functions.
#pragma once

#include <cstdint>

#include "fp8/cast_rules.h"

namespace fp8scope {

FP8SCOPE_HD std::int32_t max_key(float f) {
    std::uint32_t u = cast::bits_of(f);
    if ((u & ~cast::kSignBit) > cast::kInfBits) u = cast::kQuietNaNBits;
    // Negative floats grow in magnitude as their bits grow: flipping the magnitude bits
    // makes their order the integers' (-0 becomes -1, just below +0's 0).
    return static_cast<std::int32_t>(u & cast::kSignBit ? u ^ ~cast::kSignBit : u);
}

FP8SCOPE_HD float from_max_key(std::int32_t key) {
    const auto u = static_cast<std::uint32_t>(key);
    return cast::float_of(key < 0 ? u ^ ~cast::kSignBit : u);
}

}  // namespace fp8scope
