// Every read a trace's users make (inspect, export, the GUI's loader), in one call: the
// damaged-file tests and the trace reader's fuzzing harness walk a file the same way.
// Throws what the reader throws (a TraceError for a bad file); no gtest here.
#pragma once

#include <algorithm>
#include <climits>
#include <cstdint>
#include <string>

#include "trace_reader.h"

namespace fp8scope::trace::testing {

// `max_steps`: capture and block-map steps visited per run (a fuzzer keeps it small: a
// patched extent gives thousands).
// `large`: how a large trace opens (TraceReader::overview()).
inline void read_everything_of(const std::string& path, std::size_t max_steps = SIZE_MAX,
                               const LargeTraceOptions& large = {}) {
    TraceReader r(path, large);
    const TraceMeta& m = r.meta();
    r.refresh();
    r.events();
    r.rank_steps();
    r.rank_overview();
    r.rank_steps_detail(INT64_MIN, INT64_MAX);
    for (int run = -1; run <= static_cast<int>(m.runs.size()); ++run) {  // and ids outside the runs
        r.steps(run);
        r.steps(run, INT64_MIN, INT64_MAX);
        r.step_overview(run);
        r.scaling_overview(run);
        r.scaling_detail(run, INT64_MIN, INT64_MAX);
        r.kernel_step_overview(run);
        r.kernel_steps_detail(run, INT64_MIN, INT64_MAX);
        r.last_step(run);
        r.scaling(run, INT64_MIN, INT64_MAX);
        r.row_steps(run, INT64_MIN, INT64_MAX);
        auto capture = r.capture_steps(run), blockmap = r.blockmap_steps(run);
        capture.resize(std::min(capture.size(), max_steps));
        blockmap.resize(std::min(blockmap.size(), max_steps));
        for (auto s : capture) r.operands(run, s);
        for (int l = 0; l < static_cast<int>(m.linears.size()); ++l)
            for (Gemm g : {Gemm::Fprop, Gemm::Dgrad, Gemm::Wgrad})
                for (Operand o : {Operand::X, Operand::W, Operand::DY})
                    if (operand_slot(l, g, o) >= 0) {
                        r.operand_series(run, l, g, o);
                        for (auto s : blockmap) {
                            r.operand({run, s, l, g, o});
                            r.blockmaps({run, s, l, g, o});
                        }
                    }
        r.ops(run, INT64_MIN, INT64_MAX);
        r.gemm_errors(run);
        r.gate_up_alignment(run);
    }
}

}  // namespace fp8scope::trace::testing
