// A Trainer or Model on a CPU backend of its own, as the engine CLI builds them, so a test
// constructs one in one line.
#pragma once

#include "cpu/cpu_backend.h"
#include "engine/model.h"
#include "engine/trainer.h"

namespace fp8scope::testing {

struct OwnCpuBackend {
    explicit OwnCpuBackend(int threads) : cpu(threads) {}
    CpuBackend cpu;
};

class CpuTrainer : private OwnCpuBackend, public Trainer {
public:
    explicit CpuTrainer(const TrainConfig& config) : OwnCpuBackend(config.threads), Trainer(config, cpu) {}
};

class CpuModel : private OwnCpuBackend, public Model {
public:
    explicit CpuModel(const ModelConfig& config, int threads = 0) : OwnCpuBackend(threads), Model(config, cpu) {}
};

}  // namespace fp8scope::testing
