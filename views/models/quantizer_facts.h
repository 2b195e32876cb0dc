// What the views need to know about an analysis quantizer from its name: its FP8 format,
// whether a cast with a per-tensor scale saturated, and whether its what-if figures mean
// anything for an operand that trains with another quantizer.
#pragma once

#include <QString>
#include <string>

#include "fp8/format.h"

namespace fp8scope::views {

// The element format of a quantizer name; E4M3 when the name does not parse.
Format quantizer_format(const std::string& quantizer);

// True when the cast of a tensor with this amax at this per-tensor scale saturated: amax
// times scale, multiplied in float32 as the cast does, rounds past the format's largest
// value (E4M3: beyond 464, which rounds to 480; 448.00002 rounds to 448 and is kept).
// Rounding is monotone, so the tensor saturates exactly when its amax does. False when
// either figure is missing (NaN: block quantizers, unquantized operands).
bool cast_saturates(float amax, float scale, Format f);

// Delayed scaling's what-if figures are those of its first step (scale 1, no amax
// history) unless the operand trains with that very quantizer: they describe no cast
// the run would make. False for those; true for every other quantizer.
bool what_if_applies(const std::string& quantizer, bool in_use);
// Why a cell of a quantizer that does not apply is blank (for tooltips).
QString what_if_void_reason(const std::string& quantizer);

}  // namespace fp8scope::views
