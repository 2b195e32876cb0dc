// A real training run recorded to a trace file, as the engine records it (the trainer,
// capture's TrainRecorder and TraceWriter). Kept out of Qt translation units: the
// trainer's API has a member named like Qt's `emit` keyword.
#pragma once

#include <string>
#include <vector>

#include "engine/train_config.h"
#include "engine/train_events.h"

namespace fp8scope::testing {

// The amax of one captured operand, max |x| over the values the model handed to capture.
struct CapturedAmax {
    int run = 0;
    std::int64_t step = 0;
    int slot = 0;  // trace::operand_slot
    float amax = 0;
};

// Trains `config` (lock step when it compares recipes) with capture on and records it to
// `path`. Returns the trainer's own step records, the figures the GUI must show; with
// `amax`, also every captured operand's amax, computed here from the values themselves.
std::vector<fp8scope::StepRecord> train_and_record(const std::string& path, const TrainConfig& config,
                                                   std::int64_t blockmap_every,
                                                   std::vector<CapturedAmax>* amax = nullptr);

// The tiny lock-step comparison (baseline, delayed, blockwise, MXFP8) of the screenshots.
TrainConfig tiny_compare_config(std::int64_t steps);

}  // namespace fp8scope::testing
