// Report -> one-step trace.
#include "models/report_trace.h"

namespace fp8scope::views {

ReportTrace report_as_trace(const AnalysisReport& report, const std::string& name) {
    ReportTrace t;
    trace::TraceMeta& m = t.meta;
    m.tool_version = report.tool_version;
    m.runs = {{name, "analyze"}};
    m.quantizers = report.quantizers;
    m.capture_every = 1;
    for (std::size_t i = 0; i < report.tensors.size(); ++i) {
        const TensorAnalysis& ta = report.tensors[i];
        // 2-D view of the tensor: rows = product of the leading dimensions, cols = the last.
        std::int64_t rows = 1, cols = ta.shape.empty() ? 0 : ta.shape.back();
        for (std::size_t d = 0; d + 1 < ta.shape.size(); ++d) rows *= ta.shape[d];
        m.linears.push_back({ta.name, static_cast<int>(i), cols, rows});
        trace::OperandRecord o;
        o.key = {0, 0, static_cast<int>(i), Gemm::Fprop, Operand::X};
        o.quantizer_in_use = -1;  // not quantized by a run: every quantizer is a what-if
        o.stats = ta.analysis.tensor;
        o.errors = ta.analysis.errors;
        t.batch.operands.push_back(std::move(o));
    }
    trace::StepRecord step;
    step.run = 0;
    step.step = 0;
    t.batch.steps.push_back(step);
    return t;
}

}  // namespace fp8scope::views
