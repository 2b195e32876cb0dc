// One run's op/kernel timeline over steps [first_step, last_step] as Chrome trace event
// JSON (capture/trace/chrome_trace_events.h), with the run's device records as the
// Kernels view attributes them (kernel_attribution.h).
#pragma once

#include <QByteArray>
#include <QString>
#include <cstdint>

#include "models/run_data.h"

namespace fp8scope::views {

QByteArray chrome_trace_json(const TraceData& data, int run, std::int64_t first_step, std::int64_t last_step);

}  // namespace fp8scope::views
