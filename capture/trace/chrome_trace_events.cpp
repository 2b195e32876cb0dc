#include "chrome_trace_events.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "util/json_input.h"

namespace fp8scope::trace {

std::string chrome_trace_json(const TraceMeta& m, const std::vector<ChromeTraceRun>& runs) {
    nlohmann::json events = nlohmann::json::array();
    std::int64_t origin = std::numeric_limits<std::int64_t>::max();
    for (const ChromeTraceRun& r : runs)
        for (const OpRecord& t : r.ops) origin = std::min(origin, t.start_ns);
    // Every id and time below comes from the file: 64-bit sums and double differences,
    // so extreme values print as they are instead of overflowing.
    for (const ChromeTraceRun& r : runs) {
        const std::string run_name =
            r.run >= 0 && r.run < int(m.runs.size()) ? m.runs[r.run].name : "run " + std::to_string(r.run);
        const std::int64_t pid_base = std::int64_t(r.run) * 1000;
        events.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", pid_base},
                          {"args", {{"name", run_name + " (CPU)"}}}});
        std::set<std::int32_t> devices;
        for (const OpRecord& t : r.ops) {
            const std::int64_t pid = pid_base + (t.device >= 0 ? std::int64_t(t.device) + 1 : 0);
            if (t.device >= 0 && devices.insert(t.device).second)
                events.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", pid},
                                  {"args", {{"name", run_name + " (GPU " + std::to_string(t.device) + ")"}}}});
            nlohmann::json args = {{"step", t.step}};
            if (t.linear >= 0 && t.linear < int(m.linears.size())) args["linear"] = m.linears[t.linear].name;
            if (t.layer >= 0) args["layer"] = t.layer;
            if (t.parent >= 0 && t.parent < int(m.ops.size())) args["op"] = m.ops[t.parent];
            if (t.operand >= 0 && t.operand <= 2) args["operand"] = std::string(operand_name(Operand(t.operand)));
            if (t.bytes > 0) args["bytes"] = t.bytes;
            events.push_back({{"ph", "X"},
                              {"name", t.op >= 0 && t.op < int(m.ops.size()) ? m.ops[t.op] : std::string("?")},
                              {"cat", t.device >= 0 ? "kernel" : "op"},
                              {"ts", (double(t.start_ns) - double(origin)) / 1000.0},
                              {"dur", (double(t.end_ns) - double(t.start_ns)) / 1000.0},
                              {"pid", pid},
                              {"tid", t.stream},
                              {"args", args}});
        }
    }
    return dump_json(nlohmann::json{{"traceEvents", events}, {"displayTimeUnit", "ns"}});
}

}  // namespace fp8scope::trace
