// What happens to a run besides its steps: one list of event kinds for the engine, the
// trace (where the values are stored, so they never change) and the GUI.
#pragma once

#include <cstdint>

namespace fp8scope {

enum class EventKind : std::int32_t {
    Rewind = 0,        // restored the last good state, skipped a batch
    RecipeSwitch = 1,  // detail: "from -> to"
    Pause = 2,
    Resume = 3,
    Stop = 4,
    NonFinite = 5,     // NaN/Inf loss or gradient
    LossSpike = 6,
    Checkpoint = 7,    // detail: path
    CaptureInterval = 8,
    Start = 9,
    End = 10,
    Error = 11,        // the engine gave up or an action failed; detail: the message
    KernelTiming = 12, // detail: kernel timing on, off and why, or records it dropped
    Health = 13,       // a data-parallel health check: pre-flight, a straggler, a rank lost
    Injection = 14,    // an outlier injection starts or ends; detail: "start: x of blocks.1.mlp.fc2 ..."
    FirstNonFinite = 15,     // the run's first NaN/Inf: step, rank, layer, linear, GEMM, operand, block
    CheckpointSkipped = 16,  // a checkpoint not written from a state holding a NaN/Inf; detail: path and why
    ScalingMismatch = 17,    // a tensor's delayed-scaling state (amax history, scale) differs across ranks;
                             // detail: the tensor (linear and operand) and the ranks
    WorldChanged = 18,       // an elastic job lost ranks and went on without them; detail: "lost rank 2;
                             // world 4 -> 3; failed in step 17, restored step 12 (5 steps lost); why"
};
constexpr EventKind kLastEventKind = EventKind::WorldChanged;
constexpr int kEventKinds = static_cast<int>(kLastEventKind) + 1;

const char* event_kind_name(EventKind k);  // "rewind", "non_finite", ...

}  // namespace fp8scope
