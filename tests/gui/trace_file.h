// Writes the synthetic trace (synthetic_trace.h) to an HDF5 file with capture's
// TraceWriter, so GUI tests read a real trace file through the GUI's loader and check
// what the views show against the same formulas.
#pragma once

#include <QString>

#include "synthetic_trace.h"
#include "trace_writer.h"

namespace fp8scope::testing {

// Records of steps [from, to) of every run, in the order an engine writes them: a step's
// scaling, operands, block maps and ops before its step record.
inline void write_synthetic_steps(trace::TraceWriter& w, const SyntheticSpec& s, std::int64_t from, std::int64_t to) {
    views::TraceBatch all = synthetic_batch(s);
    for (std::int64_t step = from; step < to; ++step)
        for (int run = 0; run < s.runs; ++run) {
            for (auto& r : all.scaling) if (r.run == run && r.step == step) w.write(r);
            for (auto& r : all.operands) if (r.key.run == run && r.key.step == step) w.write(r);
            for (auto& r : all.blockmaps) if (r.key.run == run && r.key.step == step) w.write(r);
            for (auto& r : all.ops) if (r.run == run && r.step == step) w.write(r);
            for (auto& r : all.steps) if (r.run == run && r.step == step) w.write(r);
            if (run == 0) for (auto& r : all.ranks) if (r.step == step) w.write(r);  // after the step, as rank 0 does
        }
    for (auto& e : all.events) if (e.step >= from && e.step < to) w.write(e);
}

inline void write_synthetic_trace(const QString& path, const SyntheticSpec& s) {
    trace::TraceWriter w(path.toStdString(), synthetic_meta(s));
    write_synthetic_steps(w, s, 0, s.steps);
    w.close();
}

}  // namespace fp8scope::testing

