// The tiny training run of the CPU engine tests: a 32-wide byte-level model on 64 KiB of
// the builtin corpus, small enough that a test trains tens of steps in well under a
// second. Tests change what they depend on (a schedule, an eval interval) and say why.
#pragma once

#include <string>

#include "engine/train_config.h"

namespace fp8scope::testing {

inline TrainConfig tiny_config(int steps, const std::string& recipe = "baseline") {
    TrainConfig c;
    c.model.n_layer = 2;
    c.model.d_model = 32;
    c.model.n_head = 2;
    c.model.max_seq = 32;
    c.seq_len = 32;
    c.batch_size = 4;
    c.steps = steps;
    c.optimizer.lr = 1e-2f;
    c.schedule.warmup_steps = 2;
    c.data.corpus_bytes = 1 << 16;
    c.eval.every = 5;
    c.eval.batches = 2;
    c.threads = 1;
    c.recipe = recipe;
    c.seed = 5;
    return c;
}

}  // namespace fp8scope::testing
