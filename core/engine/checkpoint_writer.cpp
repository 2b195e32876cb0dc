#include "engine/checkpoint_writer.h"

#include <chrono>
#include <exception>
#include <utility>

namespace fp8scope {

CheckpointWriter::~CheckpointWriter() { wait(); }

void CheckpointWriter::wait() {
    if (thread_.joinable()) thread_.join();
}

void CheckpointWriter::write(std::string path, TrainState state) {
    wait();
    thread_ = std::thread([this, path = std::move(path), state = std::move(state)] {
        const auto t0 = std::chrono::steady_clock::now();
        Done d{path, {}, 0};
        try {
            save_checkpoint(path, state);
        } catch (const std::exception& e) {
            d.error = e.what();
        }
        d.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        std::lock_guard lock(mu_);
        done_.push_back(std::move(d));
    });
}

std::vector<CheckpointWriter::Done> CheckpointWriter::finished() {
    std::lock_guard lock(mu_);
    return std::exchange(done_, {});
}

}  // namespace fp8scope
