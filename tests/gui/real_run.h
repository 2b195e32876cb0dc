// A real training run recorded to a trace file, as the engine records it (the trainer,
// capture's TrainRecorder and TraceWriter). Kept out of Qt translation units: the
// trainer's API has a member named like Qt's `emit` keyword.
#pragma once

#include <string>
#include <vector>

#include "engine/train_config.h"
#include "engine/train_events.h"

namespace fp8scope::testing {

// Trains `config` (lock step when it compares recipes) with capture on and records it to
// `path`. Returns the trainer's own step records, the figures the GUI must show.
std::vector<fp8scope::StepRecord> train_and_record(const std::string& path, const TrainConfig& config,
                                                   std::int64_t blockmap_every);

// The tiny lock-step comparison (baseline, delayed, blockwise, MXFP8) of the screenshots.
TrainConfig tiny_compare_config(std::int64_t steps);

}  // namespace fp8scope::testing
