// One run's op/kernel timeline over steps [first_step, last_step] as Chrome trace event
// JSON (capture/trace/chrome_trace_events.h), with the run's device records as the
// Kernels view attributes them (kernel_attribution.h), the flows from host ops to their
// kernels, and counters: the loss, the learning rate and the amax and scale of
// `operands` (counter_tracks.h), each at its step's first record.
#pragma once

#include <QByteArray>
#include <QString>
#include <cstdint>
#include <vector>

#include "models/run_data.h"

namespace fp8scope::views {

QByteArray chrome_trace_json(const TraceData& data, int run, std::int64_t first_step, std::int64_t last_step,
                             const std::vector<OperandRef>& operands = {});

}  // namespace fp8scope::views
