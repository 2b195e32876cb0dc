// One meaning of colour for every view that colours a statistic: red is worse, blue is
// better, whichever way the statistic runs (higher SQNR is better, higher underflow is
// worse). Each statistic declares its direction here; the colour scales and table cues
// are built from the one list of stops below.
#pragma once

#include <QColor>
#include <array>

#include "models/selection.h"

namespace fp8scope::views {

enum class Better { Higher, Lower, Neither };
Better better_of(ErrorStat s);

// The goodness scale from worst to best, light in the middle (white at zero on a
// symmetric range of differences).
inline constexpr std::array<QRgb, 7> kGoodnessStops{0xb2182b, 0xef8a62, 0xfddbc7, 0xf7f7f7, 0xd1e5f0, 0x67a9cf, 0x2166ac};
// The background of a table cell whose value is bad: a light tint of the scale's bad end.
inline QColor bad_cell_color() { return QColor(kGoodnessStops[2]); }

}  // namespace fp8scope::views
