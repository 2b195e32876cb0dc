// The EMA the Loss view smooths with (stats/smoothing.h): the span N of pandas' ewm.
#pragma once

#include "stats/smoothing.h"

namespace fp8scope::views {

using stats::ema;

}  // namespace fp8scope::views
