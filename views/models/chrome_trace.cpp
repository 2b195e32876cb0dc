// The GUI's Chrome/Perfetto export: one run's ops and kernels over a step range, in the
// format of `fp8scope-engine export --chrome-trace` (capture/trace/chrome_trace_events.h).
#include "models/chrome_trace.h"

#include <vector>

#include "chrome_trace_events.h"

namespace fp8scope::views {

QByteArray chrome_trace_json(const TraceData& data, int run, std::int64_t first_step, std::int64_t last_step) {
    std::vector<trace::ChromeTraceRun> runs;
    std::vector<trace::OpRecord> ops;  // the store packs its records: rebuilt for the writer
    if (run >= 0 && run < static_cast<int>(data.runs.size())) {
        const RunData& rd = data.runs[run];
        const auto lo = rd.ops_of_step(first_step).first, hi = rd.ops_of_step(last_step).second;
        for (auto i = lo; i < hi; ++i) ops.push_back(rd.ops[i]);
        if (!ops.empty()) runs.push_back({run, ops});
    }
    return QByteArray::fromStdString(trace::chrome_trace_json(data.meta, runs));
}

}  // namespace fp8scope::views
