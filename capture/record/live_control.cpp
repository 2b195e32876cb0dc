#include "live_control.h"

#include <climits>
#include <string>

#include "fp8/training_recipe.h"

namespace fp8scope::live {

CommandReply apply_command(Trainer& trainer, const Command& c) {
    try {
        switch (c.kind) {
        case CommandKind::Pause: trainer.pause(); break;
        case CommandKind::Resume: trainer.resume(c.reason); break;
        case CommandKind::Stop: trainer.stop(); break;
        case CommandKind::SwitchRecipe:
            if (c.run == -1) {
                trainer.config().recipe_book().check(c.recipe);  // refuse before any run switches
                for (int r = 0; r < trainer.runs(); ++r) trainer.switch_recipe(r, c.recipe);
            } else {
                trainer.switch_recipe(c.run, c.recipe);
            }
            break;
        case CommandKind::SetCaptureEvery:
            if (c.value < 0 || c.value > INT_MAX)
                return {false, "capture interval out of range: " + std::to_string(c.value)};
            trainer.set_capture_every(static_cast<int>(c.value));
            break;
        case CommandKind::Checkpoint: trainer.checkpoint_now(); break;
        case CommandKind::RecordKernels:
            if (c.value < 1 || c.value > kMaxKernelSteps)
                return {false, "kernel records of " + std::to_string(c.value) + " steps asked, expected 1 to " +
                                   std::to_string(kMaxKernelSteps)};
            trainer.record_kernels(static_cast<int>(c.value));
            break;
        default: return {false, "unknown command " + std::to_string(static_cast<int>(c.kind))};
        }
    } catch (const std::exception& e) {
        return {false, e.what()};
    }
    return {true, ""};
}

}  // namespace fp8scope::live
