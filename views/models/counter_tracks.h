// Per-step figures drawn as counters beside a run's timeline (the Kernels view's strip
// under its lanes, the Chrome/Perfetto export's "C" events): the loss, the learning rate
// and the amax and scale in use of operands the user picks, one value per step.
#pragma once

#include <QString>
#include <cstdint>
#include <utility>
#include <vector>

#include "models/run_data.h"

namespace fp8scope::views {

struct CounterTrack {
    QString name;                                         // "loss", "amax L0 qkv fprop x"
    std::vector<std::pair<std::int64_t, double>> points;  // (step, value), step ascending; NaN kept
};

// Tracks of `run` over steps [first, last]: loss, learning rate, then amax and scale of
// each of `operands` (the scale only where the recipe has a per-tensor one).
std::vector<CounterTrack> counter_tracks(const TraceData& d, int run, std::int64_t first, std::int64_t last,
                                         const std::vector<OperandRef>& operands);

}  // namespace fp8scope::views
