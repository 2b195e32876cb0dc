// Live clients steer a run: each Command of the live protocol becomes the Trainer
// request it names (pause, resume, stop, switch a run's recipe, capture interval,
// checkpoint, keep the next steps' kernel records). The handler a LiveServer serving a
// training run is given.
#pragma once

#include "engine/trainer.h"
#include "live_protocol.h"

namespace fp8scope::live {

// Errors (an unknown recipe or run, a checkpoint without a directory, an interval out of
// range) become refused replies; the trainer applies accepted requests between steps.
CommandReply apply_command(Trainer& trainer, const Command& command);

// The most steps one request keeps the kernel records of (a day of steps at 0.13 s).
inline constexpr std::int64_t kMaxKernelSteps = 1'000'000;

}  // namespace fp8scope::live
