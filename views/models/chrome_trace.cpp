// The GUI's Chrome/Perfetto export: one run's ops and kernels over a step range, in the
// format of `fp8scope-engine export --chrome-trace` (capture/trace/chrome_trace_events.h).
#include "models/chrome_trace.h"

#include <vector>

#include "chrome_trace_events.h"
#include "models/counter_tracks.h"
#include "models/kernel_attribution.h"

namespace fp8scope::views {

QByteArray chrome_trace_json(const TraceData& data, int run, std::int64_t first_step, std::int64_t last_step,
                             const std::vector<OperandRef>& operands) {
    std::vector<trace::ChromeTraceRun> runs;
    std::vector<trace::OpRecord> ops;  // the store packs its records: rebuilt for the writer
    if (run >= 0 && run < static_cast<int>(data.runs.size())) {
        const RunData& rd = data.runs[run];
        const auto lo = rd.ops_of_step(first_step).first, hi = rd.ops_of_step(last_step).second;
        // The run's host ops, then its device records as the Kernels view attributes them
        // (records with no op and old traces' evaluation put back by time).
        for (auto i = lo; i < hi; ++i)
            if (!is_device(rd.ops[i])) ops.push_back(rd.ops[i]);
        for (auto i = lo; i < hi;) {
            const std::int64_t step = rd.ops.step(i);
            while (i < hi && rd.ops.step(i) == step) ++i;
            for (const StepKernel& k : step_kernels(data, run, step)) ops.push_back(k.rec);
        }
        if (!ops.empty()) {
            const auto start = trace::step_starts(ops);
            std::vector<trace::ChromeCounter> counters;
            for (const CounterTrack& t : counter_tracks(data, run, first_step, last_step, operands)) {
                trace::ChromeCounter c{t.name.toStdString(), {}};
                for (const auto& [step, value] : t.points)
                    if (const auto it = start.find(step); it != start.end()) c.points.emplace_back(it->second, value);
                counters.push_back(std::move(c));
            }
            runs.push_back({run, ops, std::move(counters)});
        }
    }
    return QByteArray::fromStdString(trace::chrome_trace_json(data.meta, runs));
}

}  // namespace fp8scope::views
