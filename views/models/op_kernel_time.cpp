// Per-op device time of a step.
#include "models/op_kernel_time.h"

#include "models/kernel_attribution.h"
#include "models/kernel_detail.h"

namespace fp8scope::views {

bool has_device_records(const RunData& rd) {
    if (!rd.kernel_steps.empty()) return true;
    for (std::size_t i = 0; i < rd.ops.size(); ++i)
        if (rd.ops[i].device >= 0) return true;
    return false;
}

std::vector<std::int64_t> timed_steps(const RunData& rd) {
    if (has_device_records(rd)) return detailed_steps(rd);
    std::vector<std::int64_t> out;
    for (std::size_t i = 0; i < rd.ops.size(); ++i)
        if (out.empty() || out.back() != rd.ops.step(i)) out.push_back(rd.ops.step(i));
    return out;
}

OpTimes op_kernel_time(const TraceData& d, int run, std::int64_t step) {
    if (run < 0 || run >= static_cast<int>(d.runs.size())) return {};
    return op_kernel_time(d, run, step, has_device_records(d.runs[static_cast<std::size_t>(run)]));
}

OpTimes op_kernel_time(const TraceData& d, int run, std::int64_t step, bool device) {
    OpTimes out;
    if (run < 0 || run >= static_cast<int>(d.runs.size())) return out;
    const RunData& rd = d.runs[static_cast<std::size_t>(run)];
    if (!device) {
        const int eval = eval_op_id(d.meta);
        const auto [lo, hi] = rd.ops_of_step(step);
        for (auto i = lo; i < hi; ++i) {
            const trace::OpRecord r = rd.ops[i];
            if (r.op != eval) out[{r.op, r.linear, r.operand}] += static_cast<double>(r.end_ns - r.start_ns);
        }
        return out;
    }
    if (has_kernel_records(rd, step)) {
        for (const StepKernel& k : step_kernels(d, run, step))
            if (!k.eval)
                out[{k.rec.parent, k.rec.linear, k.rec.operand}] += static_cast<double>(k.rec.end_ns - k.rec.start_ns);
        return out;
    }
    const int eval = eval_op_id(d.meta);
    for (const trace::KernelStepRecord& k : rd.step_sums(step)) {
        if (k.parent < 0 || k.parent != eval) out[{k.parent, -1, -1}] += static_cast<double>(k.total_ns);
    }
    return out;
}

}  // namespace fp8scope::views
