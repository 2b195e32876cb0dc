// Checkpoints written on a thread of their own, so training goes on while the file is
// written: the trainer only copies its state to the host (the part that must see one
// consistent step), the writer serializes it, writes it next to the destination and
// renames it into place. One write at a time: asking for the next while one runs waits for
// it, so a slow file system slows training rather than piling up copies of the state.
#pragma once

#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine/checkpoint.h"

namespace fp8scope {

class CheckpointWriter {
public:
    CheckpointWriter() = default;
    ~CheckpointWriter();  // waits for the write in flight
    CheckpointWriter(const CheckpointWriter&) = delete;
    CheckpointWriter& operator=(const CheckpointWriter&) = delete;

    void write(std::string path, TrainState state);

    struct Done {
        std::string path;
        std::string error;  // empty: written
        double seconds = 0;
    };
    // The writes finished since the last call, oldest first.
    std::vector<Done> finished();
    void wait();

private:
    std::thread thread_;
    std::mutex mu_;
    std::vector<Done> done_;
};

}  // namespace fp8scope
