#include "run_events.h"

namespace fp8scope {

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
        case EventKind::Error: return "error";
        case EventKind::KernelTiming: return "kernel_timing";
        case EventKind::Health: return "health";
        case EventKind::Injection: return "injection";
        case EventKind::FirstNonFinite: return "first_non_finite";
        case EventKind::CheckpointSkipped: return "checkpoint_skipped";
        case EventKind::ScalingMismatch: return "scaling_mismatch";
        case EventKind::WorldChanged: return "world_changed";
    }
    return "unknown";
}

}  // namespace fp8scope
