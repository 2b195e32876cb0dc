#include "chrome_trace_events.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "kernel_launches.h"
#include "util/json_input.h"
#include "util/readable_kernel_name.h"

namespace fp8scope::trace {

std::map<std::int64_t, std::int64_t> step_starts(std::span<const OpRecord> ops) {
    std::map<std::int64_t, std::int64_t> first;
    for (const OpRecord& r : ops) {
        auto [it, added] = first.emplace(r.step, r.start_ns);
        if (!added) it->second = std::min(it->second, r.start_ns);
    }
    return first;
}

ChromeCounter step_counter(const std::string& name, std::span<const OpRecord> ops, std::span<const StepRecord> steps,
                           double StepRecord::*field) {
    const auto first = step_starts(ops);
    ChromeCounter c{name, {}};
    for (const StepRecord& s : steps)
        if (const auto it = first.find(s.step); it != first.end()) c.points.emplace_back(it->second, s.*field);
    return c;
}

std::string chrome_trace_json(const TraceMeta& m, const std::vector<ChromeTraceRun>& runs) {
    nlohmann::json events = nlohmann::json::array();
    std::int64_t origin = std::numeric_limits<std::int64_t>::max();
    for (const ChromeTraceRun& r : runs)
        for (const OpRecord& t : r.ops) origin = std::min(origin, t.start_ns);
    // Every id and time below comes from the file: 64-bit sums and double differences,
    // so extreme values print as they are instead of overflowing.
    const auto us = [&](std::int64_t ns) { return (double(ns) - double(origin)) / 1000.0; };
    std::int64_t flow_id = 0;
    for (const ChromeTraceRun& r : runs) {
        const std::string run_name =
            r.run >= 0 && r.run < int(m.runs.size()) ? m.runs[r.run].name : "run " + std::to_string(r.run);
        const std::int64_t pid_base = std::int64_t(r.run) * 1000;
        const auto pid_of = [&](const OpRecord& t) { return pid_base + (t.device >= 0 ? std::int64_t(t.device) + 1 : 0); };
        events.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", pid_base},
                          {"args", {{"name", run_name + " (CPU)"}}}});
        std::set<std::int32_t> devices;
        for (const OpRecord& t : r.ops) {
            const std::int64_t pid = pid_of(t);
            if (t.device >= 0 && devices.insert(t.device).second)
                events.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", pid},
                                  {"args", {{"name", run_name + " (GPU " + std::to_string(t.device) + ")"}}}});
            nlohmann::json args = {{"step", t.step}};
            if (t.linear >= 0 && t.linear < int(m.linears.size())) args["linear"] = m.linears[t.linear].name;
            if (t.layer >= 0) args["layer"] = t.layer;
            if (t.parent >= 0 && t.parent < int(m.ops.size())) args["op"] = m.ops[t.parent];
            if (t.operand >= 0 && t.operand <= 2) args["operand"] = std::string(operand_name(Operand(t.operand)));
            if (t.bytes > 0) args["bytes"] = t.bytes;
            std::string name = t.op >= 0 && t.op < int(m.ops.size()) ? m.ops[t.op] : std::string("?");
            if (t.device >= 0) {
                args["kernel"] = name;
                name = readable_kernel_name(name);
            }
            events.push_back({{"ph", "X"},
                              {"name", name},
                              {"cat", t.device >= 0 ? "kernel" : "op"},
                              {"ts", us(t.start_ns)},
                              {"dur", (double(t.end_ns) - double(t.start_ns)) / 1000.0},
                              {"pid", pid},
                              {"tid", t.stream},
                              {"args", args}});
        }
        // Flows: the start inside the host op's slice, the end bound to the kernel's slice.
        const std::vector<std::ptrdiff_t> launcher = launching_ops(r.ops);
        for (std::size_t i = 0; i < r.ops.size(); ++i) {
            if (launcher[i] < 0) continue;
            const OpRecord &host = r.ops[std::size_t(launcher[i])], &k = r.ops[i];
            ++flow_id;
            events.push_back({{"ph", "s"}, {"id", flow_id}, {"cat", "launch"}, {"name", "launch"},
                              {"pid", pid_of(host)}, {"tid", host.stream}, {"ts", us(host.start_ns)}});
            events.push_back({{"ph", "f"}, {"bp", "e"}, {"id", flow_id}, {"cat", "launch"}, {"name", "launch"},
                              {"pid", pid_of(k)}, {"tid", k.stream}, {"ts", us(k.start_ns)}});
        }
        for (const ChromeCounter& c : r.counters)
            for (const auto& [ns, value] : c.points)
                if (std::isfinite(value))
                    events.push_back({{"ph", "C"}, {"name", c.name}, {"pid", pid_base}, {"ts", us(ns)},
                                      {"args", {{"value", value}}}});
    }
    return dump_json(nlohmann::json{{"traceEvents", events}, {"displayTimeUnit", "ns"}});
}

}  // namespace fp8scope::trace
