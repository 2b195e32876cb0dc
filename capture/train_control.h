// Live control of a Trainer: the LiveServer's command handler. Commands become the
// trainer's thread-safe requests, applied between steps; a bad recipe or replica is
// refused at once with the trainer's message.
#pragma once

#include <functional>

#include "engine/trainer.h"
#include "live_protocol.h"

namespace fp8scope::trace {

// `events` (may be null) receives the events the trainer does not report itself
// (a capture interval change).
std::function<void(const live::Command&)> trainer_control(Trainer& trainer, RecordSink* events);

}  // namespace fp8scope::trace
