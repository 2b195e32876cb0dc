// The op/kernel timeline as Chrome trace event JSON (chrome://tracing, ui.perfetto.dev):
// one complete ("X") event per op, microseconds, pid = device (CPU: 0), tid = stream.
#pragma once

#include <QByteArray>
#include <QString>
#include <cstdint>

#include "models/run_data.h"

namespace fp8scope::views {

QByteArray chrome_trace_json(const TraceData& data, int run, std::int64_t first_step, std::int64_t last_step);

}  // namespace fp8scope::views
