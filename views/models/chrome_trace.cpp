// Chrome/Perfetto trace export. Times are made relative to the first exported op so the
// microsecond doubles keep their precision.
#include "models/chrome_trace.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <algorithm>

#include "models/display_names.h"

namespace fp8scope::views {

QByteArray chrome_trace_json(const TraceData& data, int run, std::int64_t first_step, std::int64_t last_step) {
    QJsonArray events;
    if (run >= 0 && run < static_cast<int>(data.runs.size())) {
        const RunData& rd = data.runs[run];
        auto lo = rd.ops_of_step(first_step).first, hi = rd.ops_of_step(last_step).second;
        std::int64_t t0 = INT64_MAX;
        for (auto i = lo; i < hi; ++i) t0 = std::min(t0, rd.ops[i].start_ns);
        for (auto i = lo; i < hi; ++i) {
            const trace::OpRecord& op = rd.ops[i];
            QJsonObject args{{"step", static_cast<qint64>(op.step)}, {"layer", op.layer}};
            if (op.linear >= 0) args.insert("linear", linear_label(data.meta, op.linear));
            events.append(QJsonObject{
                {"name", op_label(data.meta, op.op)},
                {"cat", op.device < 0 ? "cpu" : "gpu"},
                {"ph", "X"},
                {"ts", static_cast<double>(op.start_ns - t0) * 1e-3},
                {"dur", static_cast<double>(op.end_ns - op.start_ns) * 1e-3},
                {"pid", op.device < 0 ? 0 : op.device + 1},
                {"tid", op.stream},
                {"args", args},
            });
        }
    }
    QJsonObject root{{"traceEvents", events}, {"displayTimeUnit", "ns"},
                     {"otherData", QJsonObject{{"run", run_label(data.meta, run)}}}};
    return QJsonDocument(root).toJson(QJsonDocument::Compact);
}

}  // namespace fp8scope::views
