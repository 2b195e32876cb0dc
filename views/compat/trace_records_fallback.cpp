// Fallback definitions of capture's record helpers, compiled only while capture/ does not
// define them (see views/CMakeLists.txt). The layout follows trace_records.h:
// fprop (x, w), dgrad (dy, w), wgrad (dy, x).
#include "trace_records.h"

namespace fp8scope::trace {

int operand_slot(int linear, Gemm gemm, Operand operand) {
    int in_gemm = -1;
    switch (gemm) {
        case Gemm::Fprop: in_gemm = operand == Operand::X ? 0 : operand == Operand::W ? 1 : -1; break;
        case Gemm::Dgrad: in_gemm = operand == Operand::DY ? 0 : operand == Operand::W ? 1 : -1; break;
        case Gemm::Wgrad: in_gemm = operand == Operand::DY ? 0 : operand == Operand::X ? 1 : -1; break;
    }
    if (in_gemm < 0 || linear < 0) return -1;
    return linear * kOperandsPerLinear + static_cast<int>(gemm) * 2 + in_gemm;
}

const char* event_kind_name(EventKind k) {
    switch (k) {
        case EventKind::Rewind: return "rewind";
        case EventKind::RecipeSwitch: return "recipe_switch";
        case EventKind::Pause: return "pause";
        case EventKind::Resume: return "resume";
        case EventKind::Stop: return "stop";
        case EventKind::NonFinite: return "non_finite";
        case EventKind::LossSpike: return "loss_spike";
        case EventKind::Checkpoint: return "checkpoint";
        case EventKind::CaptureInterval: return "capture_interval";
        case EventKind::Start: return "start";
        case EventKind::End: return "end";
    }
    return "unknown";
}

}  // namespace fp8scope::trace
