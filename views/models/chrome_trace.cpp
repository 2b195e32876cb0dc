// The GUI's Chrome/Perfetto export: one run's ops and kernels over a step range, in the
// format of `fp8scope-engine export --chrome-trace` (capture/trace/chrome_trace_events.h).
#include "models/chrome_trace.h"

#include <span>

#include "chrome_trace_events.h"

namespace fp8scope::views {

QByteArray chrome_trace_json(const TraceData& data, int run, std::int64_t first_step, std::int64_t last_step) {
    std::vector<trace::ChromeTraceRun> runs;
    if (run >= 0 && run < static_cast<int>(data.runs.size())) {
        const RunData& rd = data.runs[run];
        const auto lo = rd.ops_of_step(first_step).first, hi = rd.ops_of_step(last_step).second;
        if (lo < hi) runs.push_back({run, std::span<const trace::OpRecord>(rd.ops).subspan(lo, hi - lo)});
    }
    return QByteArray::fromStdString(trace::chrome_trace_json(data.meta, runs));
}

}  // namespace fp8scope::views
