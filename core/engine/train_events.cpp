// Names of training events, as logs and traces print them.
#include "engine/train_events.h"

namespace fp8scope {

std::string_view event_name(TrainEventKind kind) {
    switch (kind) {
    case TrainEventKind::Pause: return "pause";
    case TrainEventKind::Resume: return "resume";
    case TrainEventKind::Stop: return "stop";
    case TrainEventKind::RecipeSwitch: return "recipe_switch";
    case TrainEventKind::Checkpoint: return "checkpoint";
    case TrainEventKind::NaN: return "nan";
    case TrainEventKind::Spike: return "spike";
    case TrainEventKind::Rewind: return "rewind";
    case TrainEventKind::Error: return "error";
    case TrainEventKind::CaptureInterval: return "capture_interval";
    }
    return "unknown";
}

}  // namespace fp8scope
