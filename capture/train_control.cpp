// Commands to trainer requests (train_control.h).
#include "train_control.h"

namespace fp8scope::trace {

std::function<void(const live::Command&)> trainer_control(Trainer& trainer, RecordSink* events) {
    return [&trainer, events](const live::Command& c) {
        using K = live::Command::Kind;
        switch (c.kind) {
            case K::Pause: trainer.pause(); break;
            case K::Resume: trainer.resume(); break;
            case K::Stop: trainer.stop(); break;
            case K::SwitchRecipe: trainer.switch_recipe(c.run, c.recipe); break;
            case K::CheckpointNow: trainer.checkpoint_now(c.path); break;
            case K::SetCaptureEvery:
                trainer.set_capture_every(static_cast<int>(c.every));
                // Step -1: requested between steps, applied from the next one (the step
                // counter belongs to the training thread).
                if (events)
                    events->write(EventRecord{-1, -1, EventKind::CaptureInterval,
                                              "every " + std::to_string(c.every) + " steps"});
                break;
        }
    };
}

}  // namespace fp8scope::trace
