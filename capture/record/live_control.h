// Live clients steer a run: each Command of the live protocol becomes the Trainer
// request it names (pause, resume, stop, switch a run's recipe, capture interval,
// checkpoint). The handler a LiveServer serving a training run is given.
#pragma once

#include "engine/trainer.h"
#include "live_protocol.h"

namespace fp8scope::live {

// Errors (an unknown recipe or run, a checkpoint without a directory, an interval out of
// range) become refused replies; the trainer applies accepted requests between steps.
CommandReply apply_command(Trainer& trainer, const Command& command);

}  // namespace fp8scope::live
